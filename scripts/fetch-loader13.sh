#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Puts Debian 13's Vulkan loader (libvulkan1 1.4.309) into .gl/loader13/ (ignored by git), and its
# validation layer into .gl/vvl13/ where that is missing, beside
# what ../shared/tools/device-vulkan-loaders.sh puts into .gl, for the GPU machine:
# scripts/h200-session.sh unpacks it there and loads it before Debian 12's loader (1.3.239).
# Why: at every vkCreateDevice the older loader fills its device dispatch table through the layer
# chain's vkGetDeviceProcAddr with physical-device functions it does not know as such, and
# Debian 13's validation layer (the one that knows VK_KHR_cooperative_matrix) reports each
# ("WARNING-vkGetDeviceProcAddr-device: pName is trying to grab
# vkGetPhysicalDeviceVideoEncodeQualityLevelPropertiesKHR which is an instance level function"),
# a message no vkpaged call makes (the same warning, gone with a newer loader:
# GPUOpen-Drivers/AMD-Gfx-Drivers#6). Run once, here, from anywhere inside the repo.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
mkdir -p "$root/.gl/loader13" /tmp/trixie-lists/partial
echo 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main' \
  >/tmp/trixie-sources.list  # outside the lists folder: apt-get update empties it of other files
t="-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/trixie-lists \
-oDir::Etc::SourceList=/tmp/trixie-sources.list -oDir::Etc::SourceParts=/nonexistent"
apt-get $t update -qq
(cd "$root/.gl/loader13" && apt-get $t download libvulkan1 2>&1 | grep -v '^W:' || true)
ls "$root/.gl/loader13"
# Debian 13's validation layer, where ../shared/tools/device-vulkan-loaders.sh left .gl/vvl13
# empty (on a fresh machine on 2026-12-06 its private sources list was deleted by its own
# `apt-get update`, and the download fell back to the installed 1.3.239).
if ! compgen -G "$root/.gl/vvl13/vulkan-validationlayers_*.deb" >/dev/null; then
  mkdir -p "$root/.gl/vvl13"
  (cd "$root/.gl/vvl13" && apt-get $t download vulkan-validationlayers 2>&1 | grep -v '^W:' || true)
  ls "$root/.gl/vvl13"
fi
