#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer targets of fuzz/ with clang (-fsanitize=fuzzer,address,undefined) in
# ./build-fuzz and runs them side by side, each for a bounded time, from its seed corpus in
# fuzz/corpus/<target>/. A crash, sanitizer report, failed check, leak or hang fails the run;
# the input that did it is left in build-fuzz/artifacts/ (rerun it: build-fuzz/<target> FILE).
#   VKPAGED_FUZZ_SECONDS  seconds per target (default 30)
#   VKPAGED_FUZZ_SEED     libFuzzer seed (default 1, so CI repeats the same search; 0 = random)
#   VKPAGED_FUZZ_BUILD    build folder (default build-fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

# clang with its sanitizer and libFuzzer runtimes, from the distribution, where missing.
as_root=()
[ "$(id -u)" -ne 0 ] && as_root=(sudo)
install() {
  echo "vkpaged: installing $*" >&2
  "${as_root[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
dpkg-query -W -f='${Status}' clang 2>/dev/null | grep -q "install ok installed" || install clang
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
links_fuzzer() {
  echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe/p.cpp"
  clang++ -fsanitize=fuzzer,address,undefined "$probe/p.cpp" -o "$probe/p" 2>/dev/null
}
if ! links_fuzzer; then
  # Debian 12 ships the runtimes apart from clang-14 itself (libclang-rt-14-dev).
  major=$(clang++ --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n1)
  install "libclang-rt-$major-dev"
  links_fuzzer || { echo "vkpaged: clang++ cannot link -fsanitize=fuzzer" >&2; exit 1; }
fi

build=${VKPAGED_FUZZ_BUILD:-build-fuzz}
seconds=${VKPAGED_FUZZ_SECONDS:-30}
seed=${VKPAGED_FUZZ_SEED:-1}
cmake -S fuzz -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" >/dev/null
cmake --build "$build" -j"$(nproc)"

targets=(fuzz_npy fuzz_decode_args fuzz_page_tables fuzz_cache_args fuzz_block_manager fuzz_kv_cache_plan)
mkdir -p "$build/artifacts"
pids=()
for t in "${targets[@]}"; do
  # New inputs go to the first folder (build-fuzz/corpus); the committed seeds are only read.
  mkdir -p "$build/corpus/$t"
  "$build/$t" -max_total_time="$seconds" -seed="$seed" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" "$build/corpus/$t" "fuzz/corpus/$t" \
    >"$build/$t.log" 2>&1 &
  pids+=($!)
done
failed=0
for i in "${!targets[@]}"; do
  t=${targets[$i]}
  if wait "${pids[$i]}"; then
    echo "vkpaged: $t: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$build/$t.log" | grep -o '[0-9]*$') runs, no failure"
  else
    failed=1
    echo "vkpaged: $t FAILED (full log: $build/$t.log)" >&2
    grep -v -E '^#[0-9]+|NEW_FUNC|^INFO:' "$build/$t.log" | tail -n 40 >&2
  fi
done
exit "$failed"
