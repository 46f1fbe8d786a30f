#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What the H200 device calls run to verify and record this tree's GPU paths, in stages that each
# end inside the device tool's 10-minute limit (every step has its own timeout). Built here,
# carried there (.gl for the loader and the validation layers, a stripped copy of the build):
#
#   scripts/h200-session.sh tests    BUILD OUT  # the whole suite under the validation layer
#   scripts/h200-session.sh decode   BUILD OUT  # decode targets 1-7 and the cuDNN anchor, one call
#   scripts/h200-session.sh prefill  BUILD OUT  # multi-query targets 8-10, the portable path (11),
#                                               # layouts and the prefill anchor, one call
#   scripts/h200-session.sh contract BUILD OUT  # the NumPy contract checks, every kernel forced
#   scripts/h200-session.sh mla      BUILD OUT  # MLA decode (bench --suite mla) cold and warm, and
#                                               # its PyTorch anchor, one call
#   scripts/h200-session.sh mla-prefill BUILD OUT  # MLA prefill and chunks (target 14: bench --suite
#                                               # mla-prefill) and FlashAttention-2 unabsorbed, one call
#   scripts/h200-session.sh mla-arena BUILD OUT  # the mla suite warm, each case's own buffers against
#                                               # one arena, alternating (the suite's variance)
#   scripts/h200-session.sh mla-clocks BUILD OUT  # the mla suite warm without and with a clock warm-up
#                                               # per case (--clock-warmup-ms), nvidia-smi sampling the clocks
#   scripts/h200-session.sh mla-tiles BUILD OUT  # MLA decode's cost per key tile: r1-4k cases with
#                                               # 1 to 16 workgroups of 4096 to 256 positions each
#   scripts/h200-session.sh mla-phases BUILD OUT  # where an MLA key tile's time goes: the phase-clocks
#                                               # diagnostic build's cycles per phase, SM and interval of
#                                               # each workgroup (MLA_PHASES_CASES of MLA_PHASES_SUITE,
#                                               # default mla; mla-resident: 256 workgroups in one
#                                               # pass, more than an SM each), --split single
#   scripts/h200-session.sh sass     BUILD OUT  # the SASS of the pipelines SASS_SUITE's SASS_CASE
#                                               # compiles (default: mla, r1-4k-h16-bf16; SASS_CLI:
#                                               # another build's vkpaged, e.g. a BASE's), with
#                                               # zstd carried in .gl/zstd (scripts/nvidia_sass.py)
#   scripts/h200-session.sh compare  BUILD OUT BASE...  # this build's CLI against earlier builds'
#                                               # (BASE: a folder with tools/vkpaged/vkpaged), suite by
#                                               # suite, the binaries alternating, in one call
#                                               # (COMPARE_SUITES="mla prefill" for the attention kernels)
#
# BUILD holds tests/vkpaged_tests, tests/vkpaged_test_data and tools/vkpaged/vkpaged; OUT is
# where the logs go ($OUT on the device machine). Every figure goes to OUT/<stage>-*.txt, whole;
# bench/RESULTS.md records them with these commands. scripts/gpu-prepare.sh builds BUILD
# (.devbuild), the MLA diagnostic builds and BASE builds here and packs them for the call.
#
# The device machine starts bare: source ../shared/tools/device-prefix.sh (carried in .gl) first;
# it unpacks the loader, NVIDIA's GL libraries and Debian 13's validation layer (which knows
# VK_KHR_cooperative_matrix), or says it fell back to Debian 12's.
set -uo pipefail

stage="${1:?usage: scripts/h200-session.sh tests|decode|prefill|contract|mla|mla-prefill|mla-arena|mla-clocks|mla-tiles|mla-phases|sass|compare BUILD OUT [BASE...]}"
build="${2:?BUILD}"
out="${3:?OUT}"
root="$(cd "$(dirname "$0")/.." && pwd)"
[[ "$build" = /* ]] || build="$root/$build"
cli="$build/tools/vkpaged/vkpaged"
mkdir -p "$out"
# Debian 13's loader (1.4.309) where carried, before Debian 12's (scripts/fetch-loader13.sh says why).
if compgen -G "$root/.gl/loader13/libvulkan1_*.deb" >/dev/null; then
  mkdir -p /opt/loader13 && dpkg -x "$(compgen -G "$root/.gl/loader13/libvulkan1_*.deb" | head -n 1)" /opt/loader13
  export LD_LIBRARY_PATH=/opt/loader13/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

log() { echo "=== $(date +%T) $*"; }
# Only the layers asked for: on the H200 (2026-12-05) every device creation drew "vkGetDeviceProcAddr():
# pName is trying to grab vkGetPhysicalDeviceVideoEncodeQualityLevelPropertiesKHR" from the validation
# layer, which vkpaged never asks for: taken to come from an implicit layer of the driver's above it
# (tests-info.txt lists the layers the loader found, to check). Set VK_LOADER_LAYERS_DISABLE= to keep them.
export VK_LOADER_LAYERS_DISABLE="${VK_LOADER_LAYERS_DISABLE-~implicit~}"
# Timings run without the layer (it changes them); correctness runs with it. After each run, the
# card's clocks, temperature, power and throttle reasons, so that a slow run can be read beside
# the card's state (2026-12-06: some processes ran the MLA suite's 128-head cases 2.5-5 x slower).
bench() {
  VKPAGED_VALIDATION=0 "$@" 2>&1
  local rc=$?
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_throttle_reasons.active \
      --format=csv,noheader 2>&1 | sed 's/^/gpu after the run: /'
  fi
  return $rc
}
w=(--flush-caches --warm-start)
# nvidia-smi's SM clock every 50 ms into FILE while a stage's runs go; stop_clocks FILE JSON...
# then places each case of the JSON files among the samples (scripts/bench_clocks.py: the cases
# timed below the boost clock, bench/experiments/disturbed-runs.md): the decode, prefill, mla,
# mla-prefill and mla-clocks stages. Nothing without nvidia-smi.
clocks_pid=""
start_clocks() {
  command -v nvidia-smi >/dev/null || return 0
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,utilization.gpu,power.draw \
    --format=csv,noheader,nounits -lms 50 >"$1" 2>/dev/null &
  clocks_pid=$!
}
stop_clocks() {
  [ -n "$clocks_pid" ] || return 0
  kill "$clocks_pid" 2>/dev/null
  wait "$clocks_pid" 2>/dev/null
  clocks_pid=""
  python3 "$root/scripts/bench_clocks.py" "$@"
}
# CLOCK_WARMUP_MS: --clock-warmup-ms for the mla and mla-prefill stages' runs (bench/experiments/disturbed-runs.md).
cw=()
[ -n "${CLOCK_WARMUP_MS:-}" ] && cw=(--clock-warmup-ms "$CLOCK_WARMUP_MS")

case "$stage" in
  tests)
    {
      log nvidia-smi
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv
      log "layer path: ${VK_LAYER_PATH:-system}; VK_LOADER_LAYERS_DISABLE=${VK_LOADER_LAYERS_DISABLE}"
      log "loader: $(VK_LOADER_DEBUG=info "$cli" info 2>&1 | grep -m 1 -o 'Vulkan Loader Version [0-9.]*')"
      log "layers the loader finds (implicit ones listed whether disabled or not)"
      VKPAGED_VALIDATION=1 VK_LOADER_DEBUG=layer "$cli" info 2>&1 | grep -E 'implicit|Insert|disabled|Found' | sort -u | head -40
      log info
      VKPAGED_VALIDATION=0 "$cli" info 2>&1 | head -80
    } >"$out/tests-info.txt" 2>&1
    # Every test with the validation layer and synchronization validation on: 0 messages. In
    # parallel shards (the suite takes longer than one call allows in one process), each its own
    # process and log; the logs are joined into one file, the summaries into one.
    shards="${H200_TEST_SHARDS:-14}"
    work="$(mktemp -d)"
    for ((i = 0; i < shards; ++i)); do
      GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i GPU_TEST_LOG="$work/shard$i.log" \
        timeout 520 "$root/scripts/gpu-test.sh" "$build" >"$work/shard$i.sum" 2>&1 &
    done
    wait
    for ((i = 0; i < shards; ++i)); do
      echo "##### shard $i of $shards"
      cat "$work/shard$i.log"
    done >"$out/tests-validated.log"
    for ((i = 0; i < shards; ++i)); do
      line="$(grep -E '^gpu-test: ' "$work/shard$i.sum" | tail -n 1)"
      echo "shard $i: ${line:-no summary (killed at the time limit): $(tail -n 1 "$work/shard$i.log")}"
      grep -E 'Segmentation|Aborted|core dumped' "$work/shard$i.sum" | sed "s/^/shard $i: /"
    done >"$out/tests-validated-summary.txt"
    awk '/^shard [0-9]+: gpu-test:/ { t += $4; p += $6; f += $8; s += $10; v += $12 }
         END { printf "all shards: %d tests: %d passed, %d failed, %d skipped; %d validation messages\n", t, p, f, s, v }' \
      "$out/tests-validated-summary.txt" | tee -a "$out/tests-validated-summary.txt"
    grep -vE '^all shards' "$out/tests-validated-summary.txt"
    grep -E '^\[  FAILED  \] .*\(' "$out/tests-validated.log" | head -40
    grep -E '^vkpaged: validation' "$out/tests-validated.log" | cut -c1-240 | sort | uniq -c | sort -rn | head -20
    ;;
  decode)
    start_clocks "$out/decode-clocks.csv"
    {
      log nvidia-smi
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
      # Targets 1 and 7: the standard suite twice in one process (--repeat 2 compares the rounds).
      log "standard warm x2"; bench timeout 120 "$cli" bench --suite standard "${w[@]}" --repeat 2 --json "$out/decode-standard-warm.json"
      log "standard cold"; bench timeout 60 "$cli" bench --suite standard --flush-caches --json "$out/decode-standard-cold.json"
      # Target 7 for every other suite: each warm run twice in its process too.
      log "groups warm x2"; bench timeout 90 "$cli" bench --suite groups "${w[@]}" --repeat 2 --json "$out/decode-groups-warm.json"
      log "groups warm, head slices"; VKPAGED_DECODE_TUNE=slices=1 bench timeout 50 "$cli" bench --suite groups "${w[@]}" --json "$out/decode-groups-slices.json"
      log "latency warm x2"; bench timeout 70 "$cli" bench --suite latency "${w[@]}" --repeat 2 --json "$out/decode-latency-warm.json"
      log "dtypes warm x2"; bench timeout 130 "$cli" bench --suite dtypes "${w[@]}" --repeat 2 --json "$out/decode-dtypes-warm.json"
      log "ragged warm x2"; bench timeout 110 "$cli" bench --suite ragged "${w[@]}" --repeat 2 --json "$out/decode-ragged-warm.json"
      # The cold columns of targets 3 to 6 (each repetition in its own submission).
      for suite in groups latency dtypes ragged; do
        log "$suite cold"; bench timeout 70 "$cli" bench --suite "$suite" --flush-caches --json "$out/decode-$suite-cold.json"
      done
    } >"$out/decode-vkpaged.txt" 2>&1
    stop_clocks "$out/decode-clocks.csv" "$out"/decode-*.json >"$out/decode-clocks.txt" 2>&1
    {
      # The anchor: cuDNN's kernels in CUDA graphs, kernel time against kernel time.
      log "cuDNN decode anchor"; timeout 120 python3 "$root/bench/torch_cudnn_back_to_back.py" --suite all \
        --json "$out/anchor-decode.json"
    } >"$out/decode-anchor.txt" 2>&1
    grep -E '^(=== |disturbed)' "$out/decode-vkpaged.txt" | tail -n 12
    grep -E '^bench_clocks|LOW' "$out/decode-clocks.txt" | head -n 12
    tail -n 30 "$out/decode-anchor.txt"
    ;;
  prefill)
    start_clocks "$out/prefill-clocks.csv"
    {
      log nvidia-smi
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
      log "prefill"; bench timeout 150 "$cli" bench --suite prefill --flush-caches --json "$out/prefill-prefill.json"
      log "standard warm, scalar"; bench timeout 50 "$cli" bench --suite standard --kernel scalar "${w[@]}" --json "$out/prefill-standard-scalar.json"
      log "dtypes warm, scalar"; bench timeout 60 "$cli" bench --suite dtypes --kernel scalar "${w[@]}" --json "$out/prefill-dtypes-scalar.json"
      log "standard warm, matrix-khr"; bench timeout 50 "$cli" bench --suite standard --kernel matrix-khr "${w[@]}" --json "$out/prefill-standard-khr.json"
      for layout in nhd hnd; do
        log "standard warm, $layout"; bench timeout 50 "$cli" bench --suite standard --kv-layout "$layout" "${w[@]}" --json "$out/prefill-standard-$layout.json"
      done
      log "cache-write"; bench timeout 40 "$cli" bench --suite cache-write --flush-caches --json "$out/prefill-cache-write.json"
    } >"$out/prefill-vkpaged.txt" 2>&1
    stop_clocks "$out/prefill-clocks.csv" "$out"/prefill-*.json >"$out/prefill-clocks.txt" 2>&1
    {
      log "prefill anchor"; timeout 90 python3 "$root/bench/torch_prefill_anchor.py"
    } >"$out/prefill-anchor.txt" 2>&1
    grep -E '^=== ' "$out/prefill-vkpaged.txt" | tail -n 10
    grep -E '^bench_clocks|LOW' "$out/prefill-clocks.txt" | head -n 12
    tail -n 20 "$out/prefill-anchor.txt"
    ;;
  contract)
    # docs/contract.md checked from NumPy through the CLI, each kernel forced in turn (the scripts
    # cycle the layouts themselves), under the validation layer.
    for kernel in auto scalar matrix matrix-khr; do
      log "contract_check --kernel $kernel"
      VKPAGED_VALIDATION=${CONTRACT_VALIDATION:-1} timeout 60 python3 "$root/tests/tools/contract_check.py" "$cli" --count 60 --kernel "$kernel"
    done >"$out/contract-decode.txt" 2>&1
    for kernel in auto scalar matrix; do
      log "contract_check_multi_query --kernel $kernel"
      VKPAGED_VALIDATION=${CONTRACT_VALIDATION:-1} timeout 80 python3 "$root/tests/tools/contract_check_multi_query.py" "$cli" --count 40 --kernel "$kernel"
    done >"$out/contract-multi-query.txt" 2>&1
    # MLA (the tensor-core kernel where the device has one): 30 steps, the other cases cut short.
    { log "contract_check_multi_query --mla 30"
      VKPAGED_VALIDATION=${CONTRACT_VALIDATION:-1} timeout 80 python3 "$root/tests/tools/contract_check_multi_query.py" "$cli" --count 1 --bad 0 --mla 30
    } >"$out/contract-mla.txt" 2>&1
    grep -E '^(=== |contract_check|FAIL|--kernel)' "$out"/contract-*.txt | tail -n 40
    ;;
  mla)
    # Each case beside the read bandwidth and the cooperative-matrix ceiling the same process
    # measured, its output checked against the CPU reference; then the anchor (PyTorch's SDPA
    # backends that take Dk 576, and matmul + softmax, in CUDA graphs). 190 + 190 + 180 s.
    start_clocks "$out/mla-clocks.csv"
    {
      log nvidia-smi
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
      log "mla cold"; bench timeout 190 "$cli" bench --suite mla --flush-caches "${cw[@]}" --json "$out/mla-cold.json"
      log "mla warm"; bench timeout 190 "$cli" bench --suite mla "${w[@]}" "${cw[@]}" --json "$out/mla-warm.json"
    } >"$out/mla-vkpaged.txt" 2>&1
    stop_clocks "$out/mla-clocks.csv" "$out/mla-cold.json" "$out/mla-warm.json" >"$out/mla-clocks.txt" 2>&1
    {
      log "MLA anchor"; timeout 180 python3 "$root/bench/torch_mla_anchor.py" --json "$out/mla-anchor.json"
    } >"$out/mla-anchor.txt" 2>&1
    grep -E '^(=== |matrix ceiling|read bandwidth|check FAILED)' "$out/mla-vkpaged.txt" | tail -n 12
    grep -E '^bench_clocks|LOW' "$out/mla-clocks.txt" | head -n 12
    grep -E ' best: ' "$out/mla-anchor.txt" | tail -n 32
    ;;
  mla-prefill)
    # Target 14: each case beside the same limits as the decode cases, checked against the CPU
    # reference; then FlashAttention-2 (and SDPA's other backends) on the unabsorbed shapes. The
    # compute-bound cases are timed flushed, not warm-started, as the prefill suite. 240 + 200 s.
    start_clocks "$out/mla-prefill-clocks.csv"
    {
      log nvidia-smi
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
      log "mla-prefill"; bench timeout 240 "$cli" bench --suite mla-prefill --flush-caches --repetitions 20 --warmup 2 "${cw[@]}" --json "$out/mla-prefill.json"
    } >"$out/mla-prefill-vkpaged.txt" 2>&1
    stop_clocks "$out/mla-prefill-clocks.csv" "$out/mla-prefill.json" >"$out/mla-prefill-clocks.txt" 2>&1
    {
      log "MLA prefill anchor"
      timeout 200 python3 "$root/bench/torch_mla_anchor.py" --suite mla-prefill --json "$out/mla-prefill-anchor.json"
    } >"$out/mla-prefill-anchor.txt" 2>&1
    grep -E '^bench_clocks|LOW' "$out/mla-prefill-clocks.txt" | head -n 12
    grep -E '^(=== |[a-z0-9+-]+-h[0-9]+)' "$out/mla-prefill-vkpaged.txt" "$out/mla-prefill-anchor.txt" | grep -E '=== |best:|  ok  |FAILED' | head -n 60
    ;;
  mla-arena)
    # The MLA suite's cases slow after the suite's earlier cases in one process (2026-12-06): the
    # whole suite warm with every case's buffers its own (--no-arena) and in one arena (--arena),
    # alternating, MLA_ARENA_ROUNDS processes of each.
    {
      log nvidia-smi
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
      for ((round = 1; round <= ${MLA_ARENA_ROUNDS:-2}; ++round)); do
        for mode in no-arena arena; do
          log "mla warm --$mode, round $round"
          bench timeout 190 "$cli" bench --suite mla "${w[@]}" "--$mode" --json "$out/mla-$mode-$round.json"
        done
      done
    } >"$out/mla-arena.txt" 2>&1
    grep -E '^(=== |buffers:)' "$out/mla-arena.txt" | tail -n 12
    ;;
  mla-clocks)
    # 2026-12-06: the arena removed none of the MLA suite's slow cases, and the SM clock read 345 MHz
    # after such a run. The suite warm with each of MLA_CLOCK_WARMUPS (ms of --clock-warmup-ms per
    # case; default 0 and 1000), alternating, MLA_CLOCKS_ROUNDS processes of each, with the clocks
    # sampled beside each run and each case placed among the samples (start_clocks, stop_clocks).
    {
      log nvidia-smi
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
      for ((round = 1; round <= ${MLA_CLOCKS_ROUNDS:-1}; ++round)); do
        for ms in ${MLA_CLOCK_WARMUPS:-0 1000}; do
          log "mla warm --clock-warmup-ms $ms, round $round"
          start_clocks "$out/clocks-$ms-$round.csv"
          bench timeout 200 "$cli" bench --suite mla "${w[@]}" --clock-warmup-ms "$ms" --json "$out/mla-clock$ms-$round.json"
          stop_clocks "$out/clocks-$ms-$round.csv" "$out/mla-clock$ms-$round.json"
        done
      done
    } >"$out/mla-clocks.txt" 2>&1
    grep -E '^(=== |bench_clocks|clock warm-up)' "$out/mla-clocks.txt" | tail -n 12
    ;;
  mla-tiles)
    # One request of 4096 positions split into partitions of 64 to 4096 (64 to 1 workgroups per
    # head group, each alone on an SM): the time against the tiles per workgroup separates the
    # cost of a key tile from what a workgroup pays once (set-up, epilogue, the merge).
    {
      log nvidia-smi
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
      for c in ${MLA_TILES_CASES:-r1-4k-h16-bf16 r1-4k-h16-fp8 r1-4k-h128-bf16}; do
        for p in ${MLA_TILES_PARTITIONS:-64 128 256 512 1024 2048 4096}; do
          log "$c, partitions of $p"
          bench timeout 60 "$cli" bench --suite mla --case "$c" --split split --partition-tokens "$p" "${w[@]}"
        done
        log "$c, one pass"; bench timeout 60 "$cli" bench --suite mla --case "$c" --split single "${w[@]}"
      done
    } >"$out/mla-tiles.txt" 2>&1
    grep -E '^=== |-h[0-9]+-' "$out/mla-tiles.txt" | tail -n 60
    ;;
  mla-phases)
    # Each case with --split single (one workgroup per head group and request: the merge of a split
    # would overwrite the records) through the phase-clocks build of scripts/mla-diagnostic-builds.sh
    # (MLA_PHASES_BUILD, default .devbuild-diag/phase-clocks), then through this build for its time
    # without the clocks; scripts/mla_phase_clocks.py sums the records.
    diag="${MLA_PHASES_BUILD:-$root/.devbuild-diag/phase-clocks}"
    [[ "$diag" = /* ]] || diag="$root/$diag"
    dumps="$(mktemp -d)"
    {
      log nvidia-smi
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
      for c in ${MLA_PHASES_CASES:-r32-4k-h16-bf16 r128-4k-h16-bf16 r128-4k-h16-fp8 r8-4k-h128-bf16 r32-4k-h128-bf16 r128-4k-h128-bf16}; do
        log "$c, phase-clocks"
        VKPAGED_DIAG_DUMP="$dumps" bench timeout 60 "$diag/tools/vkpaged/vkpaged" bench --suite "${MLA_PHASES_SUITE:-mla}" --case "$c" --split single "${w[@]}" --repetitions 30
        log "$c, this build"
        bench timeout 60 "$cli" bench --suite "${MLA_PHASES_SUITE:-mla}" --case "$c" --split single "${w[@]}" --repetitions 30
      done
      log "mla_phase_clocks.py"
      python3 "$root/scripts/mla_phase_clocks.py" "$dumps"
    } >"$out/mla-phases.txt" 2>&1
    rm -rf "$dumps"
    grep -E '^(=== |r[0-9]+-[0-9]+k-h[0-9]+-[a-z0-9_]+ |  cycles|r.* workgroups on )' "$out/mla-phases.txt" | cut -c1-250 | tail -n 60
    ;;
  sass)
    # The driver writes each pipeline's machine code to its disk cache; nvidia_sass.py disassembles
    # it (nvdisasm from the CUDA toolkit or Triton's copy; zstd from .gl/zstd where not installed).
    if ! command -v zstd >/dev/null && compgen -G "$root/.gl/zstd/*.deb" >/dev/null; then
      for deb in "$root"/.gl/zstd/*.deb; do dpkg -x "$deb" /opt/zstd; done
      export PATH="$PATH:/opt/zstd/usr/bin"
      export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/opt/zstd/usr/lib/x86_64-linux-gnu"
    fi
    cache="$(mktemp -d)"
    {
      log "${SASS_SUITE:-mla} --case ${SASS_CASE:-r1-4k-h16-bf16}, pipeline statistics"
      __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH="$cache" __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 \
        VKPAGED_PIPELINE_STATS=1 bench timeout 120 "${SASS_CLI:-$cli}" bench --suite "${SASS_SUITE:-mla}" \
        --case "${SASS_CASE:-r1-4k-h16-bf16}" --repetitions 20 --warmup 1
      log "nvidia_sass.py"
      python3 "$root/scripts/nvidia_sass.py" "$cache" "$out/sass" --loops 12
    } >"$out/sass.txt" 2>&1
    grep -E '^=== |pipeline[0-9]+\.sass' "$out/sass.txt" | cut -c1-300 | tail -n 30
    ;;
  compare)
    # A change's cost on the GPU: the same suites with each binary in one process each, the
    # binaries alternating round by round so that clock drift falls on all alike (issue 37's
    # 1 % check; the bf16/E4M3 regression against 2eae94d). COMPARE_SUITES picks the suites,
    # COMPARE_ROUNDS the rounds, COMPARE_CASES (texts, space-separated) the cases (bench --case:
    # every binary must know it); each run's figures go to compare-<suite>-<binary>-<round>.json.
    # Round 1 also logs each pipeline's compiler statistics (VKPAGED_PIPELINE_STATS, as its
    # pipelines are made, before any timing), so that a candidate the compiler turned into the
    # same code as its base shows as such (2026-12-06: a touch of the next tile folded away).
    shift 3
    (($# > 0)) || { echo "h200-session: compare needs at least one BASE build folder" >&2; exit 2; }
    bins=("$@" "$build")
    cases=()
    for text in ${COMPARE_CASES:-}; do cases+=(--case "$text"); done
    {
      log nvidia-smi
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
      for ((b = 0; b < ${#bins[@]}; ++b)); do echo "binary $b: ${bins[$b]}"; done
      for suite in ${COMPARE_SUITES:-standard dtypes}; do
        flags=("${w[@]}")
        [ "$suite" = prefill ] || [ "$suite" = mla-prefill ] && flags=(--flush-caches)
        for ((round = 1; round <= ${COMPARE_ROUNDS:-2}; ++round)); do
          for ((b = 0; b < ${#bins[@]}; ++b)); do
            log "$suite, binary $b, round $round"
            VKPAGED_PIPELINE_STATS=$((round == 1)) bench timeout 150 "${bins[$b]}/tools/vkpaged/vkpaged" bench \
              --suite "$suite" "${flags[@]}" "${cases[@]}" --json "$out/compare-$suite-$b-$round.json"
          done
        done
      done
    } >"$out/compare.txt" 2>&1
    grep -E '^(=== |binary )' "$out/compare.txt" | tail -n 20
    # Each binary's attention pipelines, as round 1 made them.
    grep -E '^=== .*round 1$|^vkpaged: pipeline ' "$out/compare.txt" | grep -vE 'pipeline (fill_random|read_bandwidth|matrix_ceiling)' |
      cut -c1-260 | tail -n 40
    ;;
  *)
    echo "h200-session: stage '$stage' is not tests, decode, prefill, contract, mla, mla-prefill, mla-arena, mla-clocks, mla-tiles, mla-phases, sass or compare" >&2
    exit 2
    ;;
esac
