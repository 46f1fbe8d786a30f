#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Tests scripts/khr-compiler.sh's choice of compiler with stand-in compilers and a private cache
# (no network, nothing built): the order glslc, glslangValidator, cached builds newest first; a
# compiler that exits 0 without writing SPIR-V is no compiler; `ensure` with building forbidden
# says what it would build. Arguments (from CMake, may be empty): the glslc the build uses and
# the compiler it found for GL_KHR_cooperative_matrix, checked against the real probe shader.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
script="$here/khr-compiler.sh"
real_glslc="${1:-}"
real_khr="${2:-}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0
check() {  # check NAME EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAILED: $1: expected '$2', got '$3'"; failures=$((failures + 1)); fi
}

# Stand-ins: "good" writes a SPIR-V magic number to the -o file, "bad" fails, "liar" exits 0 and
# writes nothing.
mkdir -p "$work/bin"
cat >"$work/bin/good" <<'STANDIN'
#!/usr/bin/env bash
out=""; while [ $# -gt 0 ]; do [ "$1" = -o ] && out="$2"; shift; done
printf '\x03\x02\x23\x07\x00\x05\x01\x00' >"$out"
STANDIN
printf '#!/bin/sh\nexit 1\n' >"$work/bin/bad"
printf '#!/bin/sh\nexit 0\n' >"$work/bin/liar"
chmod +x "$work/bin/"*
for kind in glslc glslangValidator; do
  for behaviour in good bad liar; do ln -s "$work/bin/$behaviour" "$work/bin/$behaviour-$kind"; done
done
cache="$work/cache"
run() { VKPAGED_CACHE_DIR="$cache" VKPAGED_KHR_BUILD=no "$@"; }

check "probe accepts a compiler that writes SPIR-V" 0 "$(run "$script" probe "$work/bin/good-glslc" && echo 0 || echo 1)"
check "probe refuses a failing compiler" 1 "$(run "$script" probe "$work/bin/bad-glslc" && echo 0 || echo 1)"
check "probe refuses a compiler that writes nothing" 1 "$(run "$script" probe "$work/bin/liar-glslangValidator" && echo 0 || echo 1)"
check "probe refuses a missing file" 1 "$(run "$script" probe "$work/bin/none" && echo 0 || echo 1)"

check "glslc first" "$work/bin/good-glslc" \
  "$(VKPAGED_GLSLC="$work/bin/good-glslc" VKPAGED_GLSLANG="$work/bin/good-glslangValidator" run "$script" find)"
check "then glslangValidator" "$work/bin/good-glslangValidator" \
  "$(VKPAGED_GLSLC="$work/bin/bad-glslc" VKPAGED_GLSLANG="$work/bin/good-glslangValidator" run "$script" find)"

mkdir -p "$cache/glslang-9.0.0/bin" "$cache/glslang-15.1.0/bin" "$cache/glslang-15.10.0/bin"
cp "$work/bin/good" "$cache/glslang-9.0.0/bin/glslangValidator"
cp "$work/bin/good" "$cache/glslang-15.1.0/bin/glslangValidator"
cp "$work/bin/bad" "$cache/glslang-15.10.0/bin/glslangValidator"
check "then the newest cached build that passes" "$cache/glslang-15.1.0/bin/glslangValidator" \
  "$(VKPAGED_GLSLC="$work/bin/bad-glslc" VKPAGED_GLSLANG=none run "$script" find)"
check "ensure reuses the cache" "$cache/glslang-15.1.0/bin/glslangValidator" \
  "$(VKPAGED_GLSLC="$work/bin/liar-glslc" VKPAGED_GLSLANG=none run "$script" ensure)"

rm -rf "$cache"
status=0
message="$(VKPAGED_GLSLC="$work/bin/bad-glslc" VKPAGED_GLSLANG=none run "$script" ensure 2>&1 >/dev/null)" || status=$?
check "ensure without a compiler and without building fails with 3" 3 "$status"
check "and says what it would build" yes "$(grep -q "would build glslang" <<<"$message" && echo yes || echo no)"

# The real compilers of this build, on the real probe shader.
if [ -n "$real_khr" ]; then
  check "the build's KHR compiler passes the probe" 0 "$("$script" probe "$real_khr" && echo 0 || echo 1)"
fi
if [ -n "$real_glslc" ] && [ -z "$real_khr" ]; then
  check "without a KHR compiler, the build's glslc fails the probe" 1 "$("$script" probe "$real_glslc" && echo 0 || echo 1)"
fi
[ "$failures" -eq 0 ] || { echo "$failures failed"; exit 1; }
echo "all passed"
