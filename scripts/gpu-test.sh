#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the whole test suite on a GPU machine with the Khronos validation layer and its
# synchronization validation on, from a build directory made elsewhere and carried there
# (ctest's files hold absolute paths of the machine that built it, so the test binary runs
# directly, with what ctest would set). Then prints one summary line:
#
#   gpu-test: <N> tests: <P> passed, <F> failed, <S> skipped; <V> validation messages; exit <E>
#
# and exits 0 only when no test failed, the binary ended normally and the layer printed nothing.
#
# Usage: scripts/gpu-test.sh [BUILD_DIR] [gtest arguments...]    (BUILD_DIR default: build)
#   e.g. scripts/gpu-test.sh build --gtest_filter='Decode*'
# Environment (each optional):
#   VKPAGED_CLI     the vkpaged binary the CLI tests run (default BUILD_DIR/tools/vkpaged/vkpaged)
#   VKPAGED_DEVICE  which Vulkan device (index or name substring; default: the best)
#   GPU_TEST_LOG    where the full output goes (default BUILD_DIR/gpu-test.log)
#   VKPAGED_PYTHON  the Python the tests run their scripts with (default: python3 on PATH)
# The validation layer must be where the loader finds it: installed (Debian 12:
# vulkan-validationlayers), or its .deb unpacked beside the loader's, e.g. on the device machine
#   for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
# with vulkan-validationlayers_*.deb among them; or VK_LAYER_PATH / VK_ADD_LAYER_PATH naming the
# directory of VkLayer_khronos_validation.json. VKPAGED_VALIDATION=sync makes every Context
# refuse to start without synchronization validation (src/vk/instance.cpp), so it cannot be
# silently off. Messages are the lines "vkpaged: validation error|warning: ..." that
# src/vk/instance.cpp prints; each test also fails on its own messages (tests/support/test_context.hpp).
# Exit status: 0 clean, 1 failed tests or validation messages, 2 nothing could run (no binary,
# no layer).
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-build}"
[[ $# -gt 0 ]] && shift
[[ "$build" = /* ]] || build="$root/$build"
tests="$build/tests/vkpaged_tests"
export VKPAGED_CLI="${VKPAGED_CLI:-$build/tools/vkpaged/vkpaged}"
export VKPAGED_VALIDATION=sync
export VKPAGED_SOURCE_DIR="${VKPAGED_SOURCE_DIR:-$root}"  # for tests that read the source tree
# The tests' Python (the contract checks need NumPy): the first python3 on PATH, which on a GPU
# machine may be an environment with NumPy where /usr/bin/python3 has none.
export VKPAGED_PYTHON="${VKPAGED_PYTHON:-$(command -v python3 || echo /usr/bin/python3)}"
log="${GPU_TEST_LOG:-$build/gpu-test.log}"

fail_setup() {
  echo "gpu-test: $*" >&2
  exit 2
}
[[ -x "$tests" ]] || fail_setup "no test binary at $tests (build with -DVKPAGED_BUILD_TESTS=ON, or give BUILD_DIR)"
[[ -x "$VKPAGED_CLI" ]] || fail_setup "no CLI at $VKPAGED_CLI (set VKPAGED_CLI)"

layer_found=""
IFS=: read -r -a layer_dirs <<<"${VK_LAYER_PATH:-}:${VK_ADD_LAYER_PATH:-}:/usr/share/vulkan/explicit_layer.d:/usr/local/share/vulkan/explicit_layer.d:/etc/vulkan/explicit_layer.d:${XDG_DATA_HOME:-$HOME/.local/share}/vulkan/explicit_layer.d"
for d in "${layer_dirs[@]}"; do
  [[ -n "$d" && -f "$d/VkLayer_khronos_validation.json" ]] && layer_found="$d/VkLayer_khronos_validation.json" && break
done
[[ -n "$layer_found" ]] || fail_setup "the Khronos validation layer (VkLayer_khronos_validation.json) is not where the loader looks; unpack or install vulkan-validationlayers, or set VK_LAYER_PATH"

echo "gpu-test: $tests, CLI $VKPAGED_CLI, layer $layer_found, log $log"
# From BUILD_DIR/tests, as ctest runs it: paths the compiler wrote relative to the build (a
# test's __FILE__) then still lead into the source tree when BUILD_DIR sits inside it.
(cd "$build/tests" && "$tests" "$@") 2>&1 | tee "$log"
status=${PIPESTATUS[0]}

count() { grep -Ec "$1" "$log" || true; }
number() { sed -En "s/$1/\\1/p" "$log" | tail -n 1; }
messages=$(count '^vkpaged: validation (error|warning):')
total=$(number '^\[==========\] ([0-9]+) tests? from .* ran\..*')
passed=$(number '^\[  PASSED  \] ([0-9]+) tests?\..*')
failed=$(number '^\[  FAILED  \] ([0-9]+) tests?, listed below:.*')
skipped=$(number '^\[  SKIPPED \] ([0-9]+) tests?, listed below:.*')
echo "gpu-test: ${total:-?} tests: ${passed:-0} passed, ${failed:-0} failed, ${skipped:-0} skipped; $messages validation messages; exit $status"

if [[ -z "$total" ]]; then
  echo "gpu-test: the test binary ended before its summary (exit $status): see $log" >&2
  exit 1
fi
[[ $status -eq 0 && "${failed:-0}" -eq 0 && $messages -eq 0 ]] || exit 1
exit 0
