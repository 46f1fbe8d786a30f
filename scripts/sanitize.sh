#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the GPU-free tests (vkpaged_host_tests: block allocator and manager, prefix cache,
# dtypes, the .npy reader, the host-side argument checks and CPU references) with
# AddressSanitizer and UndefinedBehaviorSanitizer in ./build-sanitize and runs them. Any
# report (memory error, leak, undefined behaviour) stops the run and fails. GPU tests are
# not run here: lavapipe is slow under ASan and LLVM's allocations trip LeakSanitizer.
# VKPAGED_SANITIZE_BUILD names another build folder.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build=${VKPAGED_SANITIZE_BUILD:-build-sanitize}
# -O0 -g1: a third cheaper to compile than -O1; line tables keep the reports readable.
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O0 -g1" -DVKPAGED_SANITIZE=ON \
  -DVKPAGED_BUILD_TOOLS=OFF >/dev/null
cmake --build "$build" --target vkpaged_host_tests -j"$(nproc)"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
filter='*'
# One shard per core.
shards=$(nproc)
pids=()
for ((i = 0; i < shards; ++i)); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "$build"/tests/vkpaged_host_tests --gtest_brief=1 \
    --gtest_filter="$filter" >"$build/host_tests.$i.log" 2>&1 &
  pids+=($!)
done
failed=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    failed=1
    echo "vkpaged: sanitized host tests failed (shard $i of $shards):" >&2
    cat "$build/host_tests.$i.log" >&2
  fi
done
[ "$failed" -eq 0 ] && echo "vkpaged: host tests passed under ASan and UBSan ($(cat "$build"/host_tests.*.log | grep -c '^\[  PASSED' || true) shards)"
exit "$failed"
