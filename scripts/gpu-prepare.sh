#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds, here, everything a GPU lease's calls carry (the device machine builds nothing), so that
# the first call can start as soon as `status` lends a machine:
#   .devbuild       this tree: tests/vkpaged_tests, tests/vkpaged_test_data, tools/vkpaged/vkpaged
#                   (stripped), for every stage of scripts/h200-session.sh
#   .devbuild-diag  the MLA kernel's diagnostic builds (scripts/mla-diagnostic-builds.sh)
#   .devbuild-base/<commit>  the CLI of each BASE commit, for `h200-session.sh compare`
#   .devbuild-base/<name>    the CLI of this tree's HEAD with each candidate patch <name>.patch applied
# packed with xz into .devpack/dev.tar.xz (about 4 MB where the folders are 50 MB, past what a
# call carries beside .gl and the tree: 64 MiB). A call carries [".gl", ".devpack"] and starts
# with `source scripts/device-call.sh` (which unpacks them). The folders are ignored by git (.git/info/exclude).
#
# Usage: scripts/gpu-prepare.sh BUILD [BASE...]
#   BUILD: a configured Release build folder of this tree. BASE: commits to compare against, or
#   patch files (*.patch, as bench/experiments/candidates/ keeps the kernel candidates: a branch
#   lives only as long as the checkout that holds it) applied to this tree's HEAD; each built in a
#   worktree beside this one (../vkpaged-base-<commit> or ../vkpaged-patch-<name>).
set -euo pipefail
build="${1:?usage: scripts/gpu-prepare.sh BUILD [BASE...]}"
shift
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "$build" && pwd)"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(dirname "$root")}"  # worktrees beside this one share the cache
jobs="$(nproc)"

exclude="$(git -C "$root" rev-parse --git-path info/exclude)"
[[ "$exclude" = /* ]] || exclude="$root/$exclude"
for folder in /.devbuild/ /.devbuild-diag/ /.devbuild-base/ /.devpack/; do
  grep -qxF "$folder" "$exclude" 2>/dev/null || echo "$folder" >>"$exclude"
done

# What the calls need in .gl besides ../shared/tools/device-vulkan-loaders.sh's packages: the
# prefix itself, Debian 13's loader and layer (without them every test that reads the CLI's
# messages fails on the layer's loader warning), zstd for the sass stage.
[ -d "$root/.gl" ] || { echo "gpu-prepare: no .gl: run ../shared/tools/device-vulkan-loaders.sh first" >&2; exit 1; }
[ -f "$root/.gl/device-prefix.sh" ] || cp "$root/../shared/tools/device-prefix.sh" "$root/.gl/"
if ! compgen -G "$root/.gl/loader13/libvulkan1_*.deb" >/dev/null || ! compgen -G "$root/.gl/vvl13/*.deb" >/dev/null; then
  "$root/scripts/fetch-loader13.sh"
fi
if ! compgen -G "$root/.gl/zstd/zstd_*.deb" >/dev/null; then
  mkdir -p "$root/.gl/zstd"
  (cd "$root/.gl/zstd" && apt-get download zstd libzstd1 2>&1 | grep -vE '^W:|unsandboxed' || true)
fi

echo "== this tree ($(git -C "$root" rev-parse --short HEAD)) in $build"
cmake --build "$build" --target vkpaged_tests vkpaged_cli -j"$jobs" >/dev/null
rm -rf "$root/.devbuild"
mkdir -p "$root/.devbuild/tests" "$root/.devbuild/tools/vkpaged"
strip -o "$root/.devbuild/tests/vkpaged_tests" "$build/tests/vkpaged_tests"
cp -r "$build/tests/vkpaged_test_data" "$root/.devbuild/tests/"
strip -o "$root/.devbuild/tools/vkpaged/vkpaged" "$build/tools/vkpaged/vkpaged"

echo "== the MLA kernel's diagnostic builds"
rm -rf "$root/.devbuild-diag"
"$root/scripts/mla-diagnostic-builds.sh" "$build" "$root/.devbuild-diag"

for base in "$@"; do
  if [[ "$base" == *.patch ]]; then
    patch="$(cd "$(dirname "$base")" && pwd)/$(basename "$base")"
    commit="$(basename "$base" .patch)"
    tree="$(dirname "$root")/vkpaged-patch-$commit"
    echo "== candidate $commit (HEAD and $base) in $tree"
    [ -d "$tree" ] || git -C "$root" worktree add --detach "$tree" HEAD >/dev/null
    git -C "$tree" checkout -q -- .  # the patch applied last time undone, then this HEAD
    git -C "$tree" checkout -q --detach "$(git -C "$root" rev-parse HEAD)"
    git -C "$tree" apply "$patch" || { echo "gpu-prepare: $base does not apply to HEAD" >&2; exit 1; }
  else
    commit="$(git -C "$root" rev-parse --short "$base^{commit}")"
    tree="$(dirname "$root")/vkpaged-base-$commit"
    echo "== base $commit in $tree"
    [ -d "$tree" ] || git -C "$root" worktree add --detach "$tree" "$commit" >/dev/null
  fi
  cmake -S "$tree" -B "$tree/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DVKPAGED_BUILD_TESTS=OFF >/dev/null
  cmake --build "$tree/build" --target vkpaged_cli -j"$jobs" >/dev/null
  mkdir -p "$root/.devbuild-base/$commit/tools/vkpaged"
  strip -o "$root/.devbuild-base/$commit/tools/vkpaged/vkpaged" "$tree/build/tools/vkpaged/vkpaged"
done

echo "== packing"
rm -rf "$root/.devpack"
mkdir -p "$root/.devpack"
folders=(.devbuild .devbuild-diag)
[ $# -gt 0 ] && folders+=(.devbuild-base)
tar -C "$root" -cJf "$root/.devpack/dev.tar.xz" "${folders[@]}"
echo "== carry [\".gl\", \".devpack\"]: $(du -sch "$root/.gl" "$root/.devpack" | tail -n 1 | cut -f 1) beside the tree's" \
  "$(git -C "$root" ls-files -z | (cd "$root" && xargs -0 du -cb) | tail -n 1 | cut -f 1) bytes (64 MiB a call);" \
  "start each command with: source scripts/device-call.sh (then: stage NEED NAME ..., as its header says)"
