#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what vkpaged needs to build and test from Debian/Ubuntu packages, skipping what is
# already there (as root, or through sudo). Then makes sure a GLSL compiler that knows
# GL_KHR_cooperative_matrix exists for shaders/*_khr.comp: the installed glslc where it does
# (Ubuntu 24.04, Debian 13), else glslang built from Debian 13's source package into
# ~/.cache/vkpaged as the calling user (scripts/khr-compiler.sh). VKPAGED_KHR_SHADERS=OFF skips
# that step (and scripts/build.sh then builds without the KHR matrix kernels).
set -euo pipefail
packages=(cmake g++ make pkg-config libvulkan-dev glslc spirv-tools mesa-vulkan-drivers
          vulkan-validationlayers libgtest-dev libfmt-dev libcli11-dev python3 python3-numpy
          python3-dev python3-venv python3-pip python3-setuptools python3-wheel pybind11-dev python3-pybind11
          python3-pytest libdlpack-dev
          libxxhash-dev nlohmann-json3-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  as_root=()
  [ "$(id -u)" -ne 0 ] && as_root=(sudo)
  echo "vkpaged: installing ${missing[*]}" >&2
  "${as_root[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ "${VKPAGED_KHR_SHADERS:-ON}" != OFF ]; then
  "$(dirname "$0")/khr-compiler.sh" ensure >/dev/null
fi
