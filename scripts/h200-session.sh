#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What one H200 device call runs to verify and record this tree's GPU-only paths, in stages that
# each end inside the device tool's 10-minute limit. Built here, carried there (.gl for the
# loader and the validation layer, the build's binaries, an older CLI to time beside):
#
#   scripts/h200-session.sh tests  BUILD OUT            # the whole suite under the validation layer
#   scripts/h200-session.sh record BUILD OUT [OLD_CLI]  # bench/RESULTS.md's figures, anchors included
#
# BUILD holds tests/vkpaged_tests and tools/vkpaged/vkpaged (a stripped copy of build/ is
# enough); OUT is where the logs go ($OUT on the device machine); OLD_CLI is the binary the
# standard suite is timed against in the same call (target: within 1 % warm). Every figure
# goes to OUT/<stage>-*.txt, whole; bench/RESULTS.md records them with these commands.
#
# The device machine starts bare: the first lines unpack .gl's loader, NVIDIA's GL libraries and
# the Khronos validation layer (../shared/tools/device-vulkan-loaders.sh makes .gl).
set -uo pipefail

stage="${1:?usage: scripts/h200-session.sh tests|record BUILD OUT [OLD_CLI]}"
build="${2:?BUILD}"
out="${3:?OUT}"
old="${4:-}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cli="$build/tools/vkpaged/vkpaged"
mkdir -p "$out"

if compgen -G "$root/.gl/*.deb" >/dev/null; then
  for f in "$root"/.gl/*.deb; do dpkg -x "$f" / >/dev/null 2>&1; done
  ldconfig
fi
log() { echo "=== $(date +%T) $*"; }
# Timings run without the layer (it changes them); correctness runs with it.
bench() { VKPAGED_VALIDATION=0 "$@" 2>&1; }

case "$stage" in
  tests)
    {
      log nvidia-smi
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv
      log info
      VKPAGED_VALIDATION=0 "$cli" info 2>&1 | head -80
    } >"$out/tests-info.txt" 2>&1
    # 1. Every test with the validation layer and synchronization validation on: 0 messages.
    GPU_TEST_LOG="$out/tests-validated.log" timeout 420 "$root/scripts/gpu-test.sh" "$build" \
      >"$out/tests-validated-summary.txt" 2>&1
    echo "gpu-test exit $?" >>"$out/tests-validated-summary.txt"
    # 2. The KHR paths, which a Context under Debian 12's layer (older than the extension)
    #    leaves off: the same tests without the layer.
    (cd "$build/tests" && VKPAGED_VALIDATION=0 VKPAGED_CLI="$cli" timeout 150 ./vkpaged_tests \
      --gtest_filter='Kernels/*/matrix_khr*:NonFiniteMatrixKhrTest.*:KhrFragmentLayoutTest.*:DecodePlanTest.MatrixKhr*:Kernels/AttentionTest.*:Kernels/AttentionKernelsTest.*') \
      >"$out/tests-khr.log" 2>&1
    echo "khr tests exit $?" >>"$out/tests-khr.log"
    tail -n 3 "$out/tests-validated-summary.txt"
    grep -E '^\[  FAILED  \]' "$out/tests-validated.log" | head -40
    grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/tests-khr.log" | head -20
    ;;
  record)
    w=(--flush-caches --warm-start)
    {
      log nvidia-smi
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
      # Target 1 and the 1 % gate of the shared-blocks work: this binary beside the old, twice.
      for round in 1 2; do
        for bin in $old "$cli"; do
          log "$bin standard warm, round $round"
          bench "$bin" bench --suite standard "${w[@]}"
        done
      done
      log "standard cold"; bench "$cli" bench --suite standard --flush-caches
      log "dtypes warm"; bench "$cli" bench --suite dtypes "${w[@]}"
      log "ragged warm, default order"; bench "$cli" bench --suite ragged "${w[@]}"
    } >"$out/record-decode.txt" 2>&1
    {
      log "groups warm"; bench "$cli" bench --suite groups "${w[@]}"
      log "groups warm, head slices"; VKPAGED_DECODE_TUNE=slices=1 bench "$cli" bench --suite groups "${w[@]}"
      log "latency warm"; bench "$cli" bench --suite latency "${w[@]}"
      for layout in nhd hnd; do
        log "standard warm, $layout"; bench "$cli" bench --suite standard --kv-layout "$layout" "${w[@]}"
      done
      log "standard warm, matrix-khr"; bench "$cli" bench --suite standard --kernel matrix-khr "${w[@]}"
      log "standard warm, scalar"; bench "$cli" bench --suite standard --kernel scalar "${w[@]}"
      log "cache-write"; bench timeout 90 "$cli" bench --suite cache-write --flush-caches
      log "prefill"; bench timeout 150 "$cli" bench --suite prefill --flush-caches
    } >"$out/record-more.txt" 2>&1
    {
      # The anchors: cuDNN's kernels in CUDA graphs, kernel time against kernel time.
      log "cuDNN decode anchor"; timeout 150 python3 "$root/bench/torch_cudnn_back_to_back.py" --suite all \
        --json "$out/anchor-decode.json"
      log "prefill anchor"; timeout 120 python3 "$root/bench/torch_prefill_anchor.py"
    } >"$out/record-anchors.txt" 2>&1
    tail -n 12 "$out/record-decode.txt"
    ;;
  *)
    echo "h200-session: stage '$stage' is not tests or record" >&2
    exit 2
    ;;
esac
