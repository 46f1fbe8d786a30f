#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Diagnostic builds of the MLA tensor-core kernel (shaders/mla_attention_matrix_khr.comp) for one
# GPU call: each leaves one step of the key tile out (its outputs are wrong, its times are what
# it is for), so that the tile's cost can be split by step, as bench/experiments/fp8-conversion.md
# split the fp8 decode's. Built here, carried to the GPU machine, timed there with
#
#   COMPARE_SUITES=mla COMPARE_CASES="r1-4k r8-4k r1-32k" scripts/h200-session.sh compare BUILD OUT \
#     DEST/serial-staging DEST/no-pipelining DEST/no-fused-range DEST/noload DEST/noproducts DEST/noconvert
#
# Variants (each from this tree's shader; the kernel's last three changes undone newest first):
#   no-fused-range  e55b22e undone: a bf16 tile converted in a pass of its own after its staging
#   no-pipelining   and 231e686: the staging loads at the tile's start, all in flight together
#   serial-staging  and bb3c24f: each staging load stored before the next load
#   noload          staging stores a constant instead of reading the cache (the block table is read)
#   noproducts      no matrix products: neither the scores nor P V
#   noconvert       bf16 words stored as they are loaded, not scaled into f16 (times only)
#
# Usage: scripts/mla-diagnostic-builds.sh BUILD DEST
#   BUILD: a configured build folder of this tree; DEST/<variant>/tools/vkpaged/vkpaged are written
#   (stripped). The shader is restored afterwards, and BUILD rebuilt from it.
set -euo pipefail
build="${1:?usage: scripts/mla-diagnostic-builds.sh BUILD DEST}"
dest="${2:?DEST}"
root="$(cd "$(dirname "$0")/.." && pwd)"
shader="$root/shaders/mla_attention_matrix_khr.comp"
saved="$(mktemp)"
cp "$shader" "$saved"
restore() {
  cp "$saved" "$shader"
  rm -f "$saved"
}
trap restore EXIT

variant() {  # name, then a command that edits $shader
  local name="$1"
  shift
  cp "$saved" "$shader"
  "$@"
  if cmp -s "$saved" "$shader"; then
    echo "mla-diagnostic-builds: $name changed nothing in $shader (the kernel moved on: update this script)" >&2
    exit 1
  fi
  cmake --build "$build" --target vkpaged_cli -j"$(nproc)" >/dev/null
  mkdir -p "$dest/$name/tools/vkpaged"
  strip -o "$dest/$name/tools/vkpaged/vkpaged" "$build/tools/vkpaged/vkpaged"
  echo "$name: $dest/$name/tools/vkpaged/vkpaged"
}
undo() { git -C "$root" show "$1" -- shaders/mla_attention_matrix_khr.comp | git -C "$root" apply -R; }
undo_fused_range() { undo e55b22e; }
undo_pipelining() { undo e55b22e && undo 231e686; }
undo_staging() { undo e55b22e && undo 231e686 && undo bb3c24f; }
edit() { perl -0pi -e "$1" "$shader"; }

variant no-fused-range undo_fused_range
variant no-pipelining undo_pipelining
variant serial-staging undo_staging
variant noload edit 's/raw\[k\] = cache_word\(block \* B \+ \(tile \+ c\) % B, w\);/raw[k] = 0x3c003c00u;/'
variant noproducts edit 's/if \(computes\) \{(\s+for \(uint n = )/if (false && computes) {$1/; s/if \(!values_bad\) \{/if (false && !values_bad) {/'
variant noconvert edit 's/const uint h = BF16_CACHE \? bf16_pair_to_f16\(raw\[k\], bf16_factor\) : raw\[k\];/const uint h = raw[k];/'
restore
trap - EXIT
cmake --build "$build" --target vkpaged_cli -j"$(nproc)" >/dev/null
