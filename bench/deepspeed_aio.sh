#!/usr/bin/env bash
# Builds the DeepSpeed side of `tencache-bench nvme --deepspeed-aio`: DeepSpeed's
# torch-free libaio engine (csrc/aio/common) with bench/deepspeed_aio_pass.cc, in
# a scratch folder outside the repository, for measurement only (nothing of
# DeepSpeed enters the project). Needs libaio-dev and a DeepSpeed checkout.
#
# Usage: bench/deepspeed_aio.sh DEEPSPEED_DIR [OUT_DIR]
#   DEEPSPEED_DIR  a DeepSpeed source tree (a checkout, or `git archive HEAD csrc/aio/common` of one)
#   OUT_DIR        where the executable goes (default /tmp/tencache-deepspeed-aio)
# Prints the executable's path: pass it to `tencache-bench nvme --deepspeed-aio PATH`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ds=${1:?usage: bench/deepspeed_aio.sh DEEPSPEED_DIR [OUT_DIR]}
out=${2:-/tmp/tencache-deepspeed-aio}
src="$ds/csrc/aio/common"
if [[ ! -f "$src/deepspeed_aio_common.cpp" ]]; then
  echo "bench/deepspeed_aio.sh: $src/deepspeed_aio_common.cpp not found; expected a DeepSpeed source tree" >&2
  exit 2
fi
if [[ ! -f /usr/include/libaio.h ]]; then
  echo "bench/deepspeed_aio.sh: /usr/include/libaio.h not found; install libaio-dev (apt-get install libaio-dev)" >&2
  exit 2
fi
case "$out" in "$here"/*|"$(dirname "$here")"/*)
  echo "bench/deepspeed_aio.sh: OUT_DIR $out is inside the repository; choose a scratch folder outside it" >&2
  exit 2;;
esac
mkdir -p "$out"
# -O2 and no NDEBUG (its asserts check io_submit); DeepSpeed's op builder uses -O0, the pass is I/O-bound either way.
g++ -std=c++17 -O2 -I"$src" "$src"/deepspeed_aio_common.cpp "$src"/deepspeed_aio_types.cpp \
  "$src"/deepspeed_aio_utils.cpp "$here/deepspeed_aio_pass.cc" -laio -o "$out/deepspeed-aio-pass"
echo "$out/deepspeed-aio-pass"
