#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Diagnostic builds of the MLA tensor-core kernel (shaders/mla_attention_matrix_khr.comp) for one
# GPU call: each leaves one step of the key tile out (its outputs are wrong, its times are what
# it is for), so that the tile's cost can be split by step, as bench/experiments/fp8-conversion.md
# split the fp8 decode's. Built here, carried to the GPU machine, timed there with
#
#   COMPARE_SUITES=mla COMPARE_CASES="r1-4k r8-4k r1-32k" scripts/h200-session.sh compare BUILD OUT \
#     DEST/serial-staging DEST/staging-ahead DEST/noload DEST/noproducts DEST/noconvert
#
# Variants: earlier kernels (the file as it was; the script refuses to run once the kernel
# differs from fbb120e's, the one they are measured against):
#   serial-staging  before bb3c24f: each staging load stored before the next load (aa4abc5's,
#                   the kernel the H100 run of 2026-12-05 17:15 timed)
#   staging-ahead   8fd0b48's: the staging a tile ahead and bf16 scaled as stored (231e686,
#                   e55b22e), measured slower on the H100 at 22:33 and undone
# and three cuts of this tree's kernel:
#   noload          staging stores a constant instead of reading the cache (the block table is read)
#   noproducts      no matrix products: neither the scores nor P V
#   noconvert       no bf16 range pass over the staged tile (times only)
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
if ! git -C "$root" diff --quiet fbb120e -- shaders/mla_attention_matrix_khr.comp; then
  echo "mla-diagnostic-builds: the kernel differs from fbb120e's, which the variants are made from (update this script)" >&2
  exit 1
fi
at() { git -C "$root" show "$1:shaders/mla_attention_matrix_khr.comp" >"$shader"; }
edit() { perl -0pi -e "$1" "$shader"; }

variant serial-staging at aa4abc5
variant staging-ahead at 8fd0b48
variant noload edit 's/raw\[k\] = cache_word\(block \* B \+ \(tile \+ c\) % B, w\);/raw[k] = 0x3c003c00u;/'
variant noproducts edit 's/if \(computes\) \{(\s+for \(uint n = )/if (false && computes) {$1/; s/if \(!values_bad\) \{/if (false && !values_bad) {/'
variant noconvert edit 's/if \(convert_bf16_rows\(K_BASE/if (false && convert_bf16_rows(K_BASE/'
restore
trap - EXIT
cmake --build "$build" --target vkpaged_cli -j"$(nproc)" >/dev/null
