#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Diagnostic builds of the MLA tensor-core kernel (shaders/common/mla_attention_matrix_kernel.glsl,
# the body of shaders/mla_attention_matrix_khr.comp and its address variant, and its
# planner, src/ops/mla_matrix_planner.cpp) for one GPU call: three leave one step of the key tile
# out (their outputs are wrong, their times are what they are for), so that the tile's cost can
# be split by step, as bench/experiments/fp8-conversion.md split the fp8 decode's; one changes a
# choice of the planner. Built here, carried to the GPU machine, timed there with
#
#   COMPARE_SUITES=mla COMPARE_CASES="r1-4k r8-4k r32-4k" scripts/h200-session.sh compare BUILD OUT \
#     DEST/noload DEST/noproducts DEST/unconverted DEST/long-tiles
#
# Variants of this tree (the script refuses to run once the kernel differs from the one its edits
# are written against: kernel_blob below, the bf16 finite-tile conversion's):
#   noload          staging stores a constant instead of reading the cache (the block table is read)
#   noproducts      no matrix products: neither the scores nor P V
#   unconverted     a finite bf16 tile's chunks stored as loaded, not converted to f16 in registers
#                   (the tile's largest magnitude and its barrier stay): what the conversion's
#                   arithmetic costs (times only; a tile with Inf or NaN is converted as before)
#   long-tiles      key tiles longer than 16 positions up to 72 staged words per invocation, not
#                   36 (bf16 16-head decode: tiles of 32, as 00d3ac9 to the third lease of 2026-12-06)
#   phase-clocks    scripts/mla-phase-clocks.patch: each workgroup's invocation 0 sums the SM
#                   cycles of each phase of its key tiles (between the tile's barriers) and writes
#                   them, its SM id and its start and end on the device clock in place of row 0 of
#                   its head group's output; the bench writes each case's output to
#                   VKPAGED_DIAG_DUMP/<case>-<single|split>.bin, scripts/mla_phase_clocks.py reads
#                   them. Run with --split single (a split's merge overwrites the output), e.g.
#                   VKPAGED_DIAG_DUMP=/tmp/pc DEST/phase-clocks/tools/vkpaged/vkpaged bench --suite mla \
#                     --case r128-4k-h16-bf16 --split single --warm-start --flush-caches
#                   python3 scripts/mla_phase_clocks.py /tmp/pc
# noconvert (up to the kernel of 00d3ac9) left out the second pass over the staged tile that
# converted a bf16 tile in shared memory; the kernel now converts each invocation's chunks in
# registers as it stores them, so there is no such pass to leave out, and `unconverted`, which
# leaves out only the arithmetic, is not comparable with noconvert's figures.
# The kernels before 1c49c46 (queries in shared memory) do not fit its planner's tiles; they are
# measured against their own builds (scripts/gpu-prepare.sh BASE commits).
#
# Usage: scripts/mla-diagnostic-builds.sh BUILD DEST
#   BUILD: a configured build folder of this tree; DEST/<variant>/tools/vkpaged/vkpaged are written
#   (stripped). The edited files are restored afterwards, and BUILD rebuilt from them.
set -euo pipefail
build="${1:?usage: scripts/mla-diagnostic-builds.sh BUILD DEST}"
dest="${2:?DEST}"
root="$(cd "$(dirname "$0")/.." && pwd)"
shader="$root/shaders/common/mla_attention_matrix_kernel.glsl"
planner="$root/src/ops/mla_matrix_planner.cpp"
# Every file a variant edits (phase-clocks' patch: also the context's clock feature and the bench's dump).
edited=("$shader" "$planner" "$root/src/context.cpp" "$root/tools/vkpaged/bench_mla.cpp")
saved="$(mktemp -d)"
for i in "${!edited[@]}"; do cp "${edited[$i]}" "$saved/$i"; done
restore() {
  for i in "${!edited[@]}"; do cp "$saved/$i" "${edited[$i]}"; done
}
trap 'restore; rm -rf "$saved"' EXIT

variant() {  # name, file, then a perl substitution that edits it (or `patch`: the file is a patch to apply)
  local name="$1" file="$2" substitution="$3"
  restore
  if [ "$substitution" = patch ]; then
    git -C "$root" apply "$file" || { echo "mla-diagnostic-builds: $file no longer applies (update it)" >&2; exit 1; }
  else
    perl -0pi -e "$substitution" "$file"
  fi
  local i changed=0
  for i in "${!edited[@]}"; do cmp -s "$saved/$i" "${edited[$i]}" || changed=1; done
  if [ "$changed" = 0 ]; then
    echo "mla-diagnostic-builds: $name changed nothing in $file (the code moved on: update this script)" >&2
    exit 1
  fi
  cmake --build "$build" --target vkpaged_cli -j"$(nproc)" >/dev/null
  mkdir -p "$dest/$name/tools/vkpaged"
  strip -o "$dest/$name/tools/vkpaged/vkpaged" "$build/tools/vkpaged/vkpaged"
  echo "$name: $dest/$name/tools/vkpaged/vkpaged"
}
# The kernel the variants are written against, as a blob id (`git hash-object`) rather than a
# commit, so that the commit which changes the kernel can carry this line.
kernel_blob=8babd690d582ad5560b9247bc948cb0a68c3860a
if [ "$(git -C "$root" hash-object "$shader")" != "$kernel_blob" ]; then
  echo "mla-diagnostic-builds: the kernel differs from blob $kernel_blob, which the variants are made from (update this script)" >&2
  exit 1
fi
variant noload "$shader" 's/raw\[k\] = cache_chunk\(block, \(tile \+ c\) % B, j\);/raw[k] = uvec4(0x3c003c00u);/'
variant noproducts "$shader" 's/if \(computes\) \{(\s+for \(uint n = )/if (false && computes) {$1/; s/if \(!values_bad\) \{/if (false && !values_bad) {/'
variant unconverted "$shader" 's/finite_bf16_chunk_to_f16\(raw\[k\], factor\)/raw[k]/'
variant long-tiles "$planner" 's/kMaxStageWords = 36;/kMaxStageWords = 72;/'
variant phase-clocks "$root/scripts/mla-phase-clocks.patch" patch
restore
trap 'rm -rf "$saved"' EXIT
cmake --build "$build" --target vkpaged_cli -j"$(nproc)" >/dev/null
