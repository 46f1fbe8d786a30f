#!/usr/bin/env bash
# Installs what vkpaged needs to build and test from Debian/Ubuntu packages, skipping what is
# already there. Runs as root, or through sudo.
set -euo pipefail
packages=(cmake g++ make pkg-config libvulkan-dev glslc spirv-tools mesa-vulkan-drivers
          vulkan-validationlayers libgtest-dev libfmt-dev libcli11-dev python3 python3-numpy)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
as_root=()
[ "$(id -u)" -ne 0 ] && as_root=(sudo)
echo "vkpaged: installing ${missing[*]}" >&2
"${as_root[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
