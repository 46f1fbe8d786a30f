#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Diagnostic builds of the MLA tensor-core kernel (shaders/mla_attention_matrix_khr.comp and its
# planner, src/ops/mla_matrix_planner.cpp) for one GPU call: three leave one step of the key tile
# out (their outputs are wrong, their times are what they are for), so that the tile's cost can
# be split by step, as bench/experiments/fp8-conversion.md split the fp8 decode's; one changes a
# choice of the planner. Built here, carried to the GPU machine, timed there with
#
#   COMPARE_SUITES=mla COMPARE_CASES="r1-4k r8-4k r32-4k" scripts/h200-session.sh compare BUILD OUT \
#     DEST/noload DEST/noproducts DEST/noconvert DEST/short-tiles
#
# Variants of this tree (the script refuses to run once the kernel differs from d7919e6's, the
# one its edits are written against):
#   noload          staging stores a constant instead of reading the cache (the block table is read)
#   noproducts      no matrix products: neither the scores nor P V
#   noconvert       no bf16 range pass over the staged tile (times only)
#   short-tiles     key tiles longer than 16 positions only up to 36 staged words per invocation,
#                   not 72 (bf16 16-head decode: tiles of 16, as before 2026-12-06's long-tiles run)
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
shader="$root/shaders/mla_attention_matrix_khr.comp"
planner="$root/src/ops/mla_matrix_planner.cpp"
saved="$(mktemp -d)"
cp "$shader" "$saved/shader"
cp "$planner" "$saved/planner"
restore() {
  cp "$saved/shader" "$shader"
  cp "$saved/planner" "$planner"
}
trap 'restore; rm -rf "$saved"' EXIT

variant() {  # name, file, then a perl substitution that edits it
  local name="$1" file="$2" substitution="$3"
  restore
  perl -0pi -e "$substitution" "$file"
  if cmp -s "$saved/shader" "$shader" && cmp -s "$saved/planner" "$planner"; then
    echo "mla-diagnostic-builds: $name changed nothing in $file (the code moved on: update this script)" >&2
    exit 1
  fi
  cmake --build "$build" --target vkpaged_cli -j"$(nproc)" >/dev/null
  mkdir -p "$dest/$name/tools/vkpaged"
  strip -o "$dest/$name/tools/vkpaged/vkpaged" "$build/tools/vkpaged/vkpaged"
  echo "$name: $dest/$name/tools/vkpaged/vkpaged"
}
if ! git -C "$root" diff --quiet d7919e6 -- shaders/mla_attention_matrix_khr.comp; then
  echo "mla-diagnostic-builds: the kernel differs from d7919e6's, which the variants are made from (update this script)" >&2
  exit 1
fi
variant noload "$shader" 's/raw\[k\] = cache_chunk\(block \* B \+ \(tile \+ c\) % B, j\);/raw[k] = uvec4(0x3c003c00u);/'
variant noproducts "$shader" 's/if \(computes\) \{(\s+for \(uint n = )/if (false && computes) {$1/; s/if \(!values_bad\) \{/if (false && !values_bad) {/'
variant noconvert "$shader" 's/if \(convert_bf16_rows\(K_BASE/if (false && convert_bf16_rows(K_BASE/'
variant short-tiles "$planner" 's/kMaxStageWords = 72;/kMaxStageWords = 36;/'
restore
trap 'rm -rf "$saved"' EXIT
cmake --build "$build" --target vkpaged_cli -j"$(nproc)" >/dev/null
