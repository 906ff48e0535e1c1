#!/usr/bin/env bash
# run_k8s_test.sh CASE: one CTest case of the offline Kubernetes checks (no cluster
# is reachable in tests; tests/k8s/validate.mjs says what is checked).
#   kustomize_base          kubectl kustomize k8s/, validated, with the pieces jobs rely on
#   validator_rejects_bad   every bad/*.yaml exits 1 and names each "# expect:" line
#   validator_accepts_good  good/*.yaml exit 0; without the MPIJob CRD, 0 and a skip notice
# Exit 77 (CTest's skip) when node, the npm packages or kubectl are missing, and
# where the MPIJob CRD is absent after the cases that run without it passed.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
crd="${TENCACHE_MPIJOB_CRD:-$repo/../shared/k8s/kubeflow.org_mpijobs.yaml}"
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

command -v node >/dev/null || skip "node not found (install Node.js 18 or newer; scripts/install-deps.sh does)"
[ -d "$here/node_modules" ] || skip "$here/node_modules missing: run npm ci --prefix tests/k8s (scripts/install-deps.sh does)"
validate() { node "$here/validate.mjs" "$@"; }

kustomize_base() {
  command -v kubectl >/dev/null || skip "kubectl not found (https://kubernetes.io/docs/tasks/tools/); the base is not checked"
  local out
  out="$(kubectl kustomize "$repo/k8s")" || fail "kubectl kustomize $repo/k8s failed"
  printf '%s\n' "$out" | validate - || fail "the kustomize base does not validate"
  # What the rendered jobs and docs/kubernetes.md rely on, line by line.
  local lines
  lines="$(sed 's/^ *//' <<<"$out")"
  for want in "kind: Namespace" "name: tencache" "kind: ServiceAccount" "automountServiceAccountToken: false" \
              "kind: StorageClass" "name: tencache-local-nvme" "provisioner: kubernetes.io/no-provisioner" \
              "volumeBindingMode: WaitForFirstConsumer"; do
    grep -qxF -- "$want" <<<"$lines" || fail "the base lacks '$want'"
  done
  echo "PASS: kubectl kustomize k8s/ builds and validates"
}

validator_rejects_bad() {
  local f out rc skipped=0
  for f in "$here"/bad/*.yaml; do
    if grep -q '^# needs: mpijob-crd' "$f" && [ ! -f "$crd" ]; then
      echo "not run without the MPIJob CRD: $(basename "$f")"; skipped=1; continue
    fi
    out="$(validate "$f" 2>&1)"; rc=$?
    [ "$rc" -eq 1 ] || fail "$(basename "$f"): exit $rc, expected 1; output: $out"
    while IFS= read -r want; do
      grep -qF -- "$want" <<<"$out" || fail "$(basename "$f"): output lacks '$want'; output: $out"
    done < <(sed -n 's/^# expect: //p' "$f")
    echo "rejected as expected: $(basename "$f")"
  done
  [ "$skipped" -eq 0 ] || skip "MPIJob CRD not found at $crd (set TENCACHE_MPIJOB_CRD); its cases were not run"
  echo "PASS: every bad manifest rejected with its problem named"
}

validator_accepts_good() {
  local out rc
  out="$(validate "$here"/good/*.yaml 2>&1)"; rc=$?
  [ "$rc" -eq 0 ] || fail "good manifests rejected (exit $rc): $out"
  out="$(TENCACHE_MPIJOB_CRD=/nonexistent/mpijobs.yaml validate "$here/good/mpijob.yaml" 2>&1)"; rc=$?
  if [ "$rc" -ne 0 ] || ! grep -qF "MPIJob schema check skipped: /nonexistent/mpijobs.yaml not found" <<<"$out"; then
    fail "without the CRD: expected exit 0 and a skip notice, got exit $rc: $out"
  fi
  [ -f "$crd" ] || skip "MPIJob CRD not found at $crd (set TENCACHE_MPIJOB_CRD); good/mpijob.yaml checked by name only"
  echo "PASS: good manifests accepted"
}

# rendered_examples LAUNCH: `tencache-launch render` of every example job validates.
rendered_examples() {
  local launch=$1 ex out
  for ex in "$repo"/configs/examples/*.yaml; do
    out="$(cd "$repo" && "$launch" render "$ex" --set cluster.image=registry.example.com/tencache/worker:0.1.0)" ||
      fail "render $(basename "$ex") failed: $out"
    printf '%s\n' "$out" | validate - || fail "the render of $(basename "$ex") does not validate"
  done
  # The cluster features on several nodes: each fabric, each gang scheduler, a named NVMe volume.
  local variants=(
    "cluster.instance_types=[p5.48xlarge] cluster.nodes=4 cluster.queue=team-a cluster.priority_class=high"
    "cluster.instance_types=[Standard_ND96amsr_A100_v4] cluster.nodes=2 cluster.gang_scheduler=volcano cluster.queue=gpu"
    "cluster.instance_types=[p4d.24xlarge] cluster.nodes=2 cluster.gang_scheduler=scheduler-plugins cluster.nvme_volume=host-path"
    "cluster.instance_types=[a3-highgpu-8g] cluster.nodes=2 cluster.nvme_volume=ephemeral cluster.nvme_storage_class=gp3")
  local v sets s
  for v in "${variants[@]}"; do
    sets=()
    for s in $v; do sets+=(--set "$s"); done
    out="$(cd "$repo" && "$launch" render configs/examples/llama-2-70b.yaml \
             --set cluster.image=registry.example.com/tencache/worker:0.1.0 "${sets[@]}")" ||
      fail "render of llama-2-70b with $v failed: $out"
    printf '%s\n' "$out" | validate - || fail "the render of llama-2-70b with $v does not validate"
  done
  [ -f "$crd" ] || skip "MPIJob CRD not found at $crd: the MPIJobs were checked by name only"
  echo "PASS: every example's render validates, and the cluster variants of llama-2-70b"
}

case "${1:-}" in
  kustomize_base|validator_rejects_bad|validator_accepts_good) "$1" ;;
  rendered_examples) "$1" "$2" ;;
  *) echo "usage: $0 kustomize_base|validator_rejects_bad|validator_accepts_good|rendered_examples LAUNCH" >&2; exit 2 ;;
esac
