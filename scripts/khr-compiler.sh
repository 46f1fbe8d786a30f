#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A GLSL compiler that knows GL_KHR_cooperative_matrix, for shaders/*_khr.comp (CMake picks it:
# cmake/ShaderCompilers.cmake). Debian 12's glslc (glslang 11.13) refuses the extension; Debian
# 13's glslang (15.x) knows it and builds on Debian 12 from its source package, without its
# optimizer, in a minute or two. Ubuntu 24.04's own glslc already knows it.
#
#   khr-compiler.sh probe COMPILER  exit 0 when COMPILER (a glslc or a glslangValidator) compiles
#                                   cmake/probes/khr_cooperative_matrix.comp
#   khr-compiler.sh find            print the first compiler that passes the probe: glslc, then
#                                   glslangValidator (from PATH), then the newest build in the cache
#   khr-compiler.sh ensure          find; failing that, build glslang from Debian 13's source
#                                   package into the cache; print the compiler's path
#
# The cache: ${VKPAGED_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vkpaged}/glslang-<version>/bin.
# Environment: VKPAGED_GLSLC and VKPAGED_GLSLANG name the first two candidates (default: glslc and
# glslangValidator from PATH; "none" skips one); VKPAGED_KHR_BUILD=no makes `ensure` fail
# (exit 3) instead of building, saying what it would build; VKPAGED_DEBIAN_MIRROR and
# VKPAGED_DEBIAN_KEYRING replace http://deb.debian.org/debian and the Debian archive keyring
# (/usr/share/keyrings/debian-archive-keyring.gpg; on Ubuntu, package debian-archive-keyring).
# Nothing touches the system's apt configuration: the source package is fetched with private
# lists into a temporary folder.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
probe_shader="$root/cmake/probes/khr_cooperative_matrix.comp"
cache_dir="${VKPAGED_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vkpaged}"
debian_suite=trixie

say() { echo "khr-compiler: $*" >&2; }

# probe COMPILER: compiles the probe shader the way cmake/EmbedShaders.cmake compiles shaders.
probe() {
  local compiler="$1" out status
  [ -x "$compiler" ] || return 1
  out="$(mktemp)"
  case "$(basename "$compiler")" in
    *glslc*) "$compiler" --target-env=vulkan1.2 -o "$out" "$probe_shader" >/dev/null 2>&1 && status=0 || status=1 ;;
    *) "$compiler" -V --target-env vulkan1.2 -o "$out" "$probe_shader" >/dev/null 2>&1 && status=0 || status=1 ;;
  esac
  # A compiler that exits 0 must also have written a SPIR-V module (magic 0x07230203).
  if [ "$status" -eq 0 ] && [ "$(od -An -tx4 -N4 "$out" 2>/dev/null | tr -d ' ')" != "07230203" ]; then status=1; fi
  rm -f "$out"
  return "$status"
}

candidate() {  # candidate VALUE DEFAULT_NAME: the path to try, or nothing
  local value="${1:-}" name="$2"
  [ "$value" = none ] && return 0
  if [ -n "$value" ]; then echo "$value"; else command -v "$name" || true; fi
}

find_compiler() {
  local c
  for c in "$(candidate "${VKPAGED_GLSLC:-}" glslc)" "$(candidate "${VKPAGED_GLSLANG:-}" glslangValidator)"; do
    [ -n "$c" ] && probe "$c" && { echo "$c"; return 0; }
  done
  # Cached builds, newest version first.
  for c in $(ls -d "$cache_dir"/glslang-*/bin/glslangValidator 2>/dev/null | sort -rV); do
    probe "$c" && { echo "$c"; return 0; }
  done
  return 1
}

work=""
build_compiler() {
  local keyring="${VKPAGED_DEBIAN_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}"
  local mirror="${VKPAGED_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
  if [ "${VKPAGED_KHR_BUILD:-yes}" = no ]; then
    say "no compiler knows GL_KHR_cooperative_matrix; would build glslang from Debian $debian_suite's source package into $cache_dir"
    exit 3
  fi
  if [ ! -r "$keyring" ]; then
    say "no compiler knows GL_KHR_cooperative_matrix, and the Debian archive keyring ($keyring) to fetch Debian"
    say "$debian_suite's glslang source with is missing. Install glslang 13 or newer (Ubuntu 24.04's glslc passes),"
    say "or debian-archive-keyring from a release that has the $debian_suite keys (VKPAGED_DEBIAN_KEYRING=file),"
    say "or build vkpaged without the KHR matrix kernels (VKPAGED_KHR_SHADERS=OFF)."
    exit 1
  fi
  for tool in apt-get cmake c++ make python3 tar; do
    command -v "$tool" >/dev/null || { say "building glslang needs $tool"; exit 1; }
  done
  work="$(mktemp -d)"  # global: the EXIT trap reads it after this function returned
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/apt/sources.list.d" "$work/src"
  echo "deb-src [signed-by=$keyring] $mirror $debian_suite main" >"$work/apt/sources.list"
  local apt=(apt-get -qq "-oDir::State::Lists=$work/apt/lists" "-oDir::Etc::SourceList=$work/apt/sources.list"
             "-oDir::Etc::SourceParts=$work/apt/sources.list.d" "-oDir::Cache=$work/apt/cache")
  # As root apt downloads as _apt, which cannot enter the private folder.
  [ "$(id -u)" -eq 0 ] && apt+=("-oAPT::Sandbox::User=root")
  say "fetching glslang's source package from Debian $debian_suite ($mirror)"
  "${apt[@]}" update
  (cd "$work/src" && "${apt[@]}" source --download-only glslang >/dev/null)
  local dsc version upstream orig
  dsc="$(cd "$work/src" && ls glslang_*.dsc)"
  version="${dsc#glslang_}"; version="${version%.dsc}"; upstream="${version%-*}"
  orig="$(ls "$work/src"/glslang_"$upstream".orig.tar.*)"
  tar xf "$orig" -C "$work/src"
  local src="$work/src/glslang-$upstream" dest="$cache_dir/glslang-$upstream"
  [ -f "$src/CMakeLists.txt" ] || { say "unexpected layout of $orig"; exit 1; }
  say "building glslang $upstream (optimizer off) with $(nproc) jobs"
  local launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  # Its compiler warnings are glslang's business: the log is shown only when the build fails.
  if ! { cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DENABLE_OPT=OFF -DGLSLANG_TESTS=OFF \
           -DENABLE_HLSL=OFF -DENABLE_SPVREMAPPER=OFF -DBUILD_EXTERNAL=OFF -DGLSLANG_ENABLE_INSTALL=OFF \
           "${launcher[@]}" &&
         cmake --build "$work/build" --target glslang-standalone -j"$(nproc)"; } >"$work/build.log" 2>&1; then
    tail -n 40 "$work/build.log" >&2
    say "building glslang $upstream failed (the end of its log is above)"
    exit 1
  fi
  mkdir -p "$dest.partial/bin"
  cp "$work/build/StandAlone/glslang" "$dest.partial/bin/glslangValidator"
  cp "$work/src/$dsc" "$dest.partial/" 2>/dev/null || true
  probe "$dest.partial/bin/glslangValidator" || { say "the glslang just built fails the probe shader"; exit 1; }
  rm -rf "$dest"
  mv "$dest.partial" "$dest"
  say "built $dest/bin/glslangValidator"
  echo "$dest/bin/glslangValidator"
}

case "${1:-}" in
  probe) [ $# -eq 2 ] || { say "usage: $0 probe COMPILER"; exit 2; }; probe "$2" ;;
  find) find_compiler ;;
  ensure) find_compiler || build_compiler ;;
  *) say "usage: $0 probe COMPILER | find | ensure"; exit 2 ;;
esac
