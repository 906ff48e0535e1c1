#!/usr/bin/env bash
# Network-namespace "nodes" on one machine, for the multi-node tests: each node
# is a process in its own network and UTS namespace (its own hostname and
# interface), joined to the others through a bridge by a veth link, with an
# address from 192.0.2.0/24 (TEST-NET-1: traffic never leaves this machine).
# Nothing here is a real second machine: same kernel, same disk, same cores.
#
#   netns-nodes.sh up DIR N [RATE]   create N nodes (tcn1..tcnN, 192.0.2.1..N);
#                                    RATE (e.g. 1gbit) shapes each node's link with tc tbf
#   netns-nodes.sh down DIR          remove them
#   netns-nodes.sh kill DIR HOST     kill -9 every process of node HOST (the node dies)
#   DIR/rsh HOST CMD...              the rsh agent: runs CMD inside HOST's namespaces
#                                    (Open MPI's plm_rsh_agent, in place of ssh)
# Requires root, unshare, nsenter, ip and tc. Exit 77 (skip) when namespaces
# cannot be made here.
set -euo pipefail
cmd=${1:?usage: netns-nodes.sh up DIR N [RATE] | down DIR}
dir=${2:?DIR}

skip() { echo "netns-nodes: cannot make network namespaces here: $*" >&2; exit 77; }

# kill -9 every process in the network namespace of process $1.
kill_node() {
  local ns p
  ns=$(readlink "/proc/$1/ns/net" 2>/dev/null) || return 0
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/ns/net" 2>/dev/null)" = "$ns" ] && kill -9 "${p#/proc/}" 2>/dev/null
  done
  return 0
}

case "$cmd" in
up)
  n=${3:?N}
  rate=${4:-}
  [ "$(id -u)" = 0 ] || skip "not root"
  for t in unshare nsenter ip tc; do command -v $t >/dev/null || skip "$t missing"; done
  mkdir -p "$dir"
  bridge=tcbr$RANDOM
  echo "$bridge" >"$dir/bridge"
  ip link add "$bridge" type bridge 2>/dev/null || skip "ip link add bridge failed"
  ip link set "$bridge" up
  for i in $(seq 1 "$n"); do
    host=tcn$i addr=192.0.2.$i
    # The node: a sleeping process holding new network and UTS namespaces; it
    # says its PID through a fifo once the namespaces exist.
    rm -f "$dir/ready"
    mkfifo "$dir/ready"
    unshare --net --uts sh -c "echo \$\$ >'$dir/ready'; exec sleep infinity" </dev/null >/dev/null 2>&1 &
    pid=$(cat "$dir/ready")
    rm -f "$dir/ready"
    echo "$pid" >"$dir/$addr.pid"
    echo "$addr" >>"$dir/hosts"
    nsenter -t "$pid" -u hostname "$host"
    ip link add "v$bridge$i" type veth peer name eth0 netns "/proc/$pid/ns/net"
    ip link set "v$bridge$i" master "$bridge" up
    nsenter -t "$pid" -n ip link set lo up
    nsenter -t "$pid" -n ip addr add "$addr/24" dev eth0
    nsenter -t "$pid" -n ip link set eth0 up
    if [ -n "$rate" ]; then
      nsenter -t "$pid" -n tc qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 100ms
    fi
  done
  cat >"$dir/rsh" <<RSH
#!/usr/bin/env bash
# rsh agent for the namespace nodes in $dir (in place of ssh): HOST CMD...
while [ "\${1#-}" != "\$1" ]; do shift; done   # ssh-style options Open MPI may pass
host=\$1; shift
pidfile="$dir/\$host.pid"
[ -f "\$pidfile" ] || { echo "rsh: no namespace node \$host" >&2; exit 255; }
# The node's temporary files (Open MPI's session folder among them, which a
# killed node's orted cannot remove) stay in DIR, which the test removes.
mkdir -p "$dir/tmp/\$host"
exec nsenter -t "\$(cat "\$pidfile")" -n -u -- env TMPDIR="$dir/tmp/\$host" /bin/sh -c "\$*"
RSH
  chmod +x "$dir/rsh"
  ;;
down)
  # Every process left in a node's namespace goes with it (an orted or a rank
  # of a run that failed), then the bridge.
  for f in "$dir"/*.pid; do
    [ -f "$f" ] || continue
    kill_node "$(cat "$f")"
    rm -f "$f"
  done
  [ -f "$dir/bridge" ] && ip link del "$(cat "$dir/bridge")" 2>/dev/null || true
  rm -rf "$dir/bridge" "$dir/hosts" "$dir/rsh" "$dir/tmp"
  ;;
kill)
  host=${3:?HOST}
  kill_node "$(cat "$dir/$host.pid")"
  rm -f "$dir/$host.pid"
  ;;
*) echo "usage: netns-nodes.sh up DIR N [RATE] | down DIR | kill DIR HOST" >&2; exit 2 ;;
esac
