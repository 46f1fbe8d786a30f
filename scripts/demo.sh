#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds vkpaged and runs the demo on the default Vulkan device (lavapipe where no GPU exists).
# Extra arguments go to `vkpaged demo` (see `build/tools/vkpaged/vkpaged demo --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
exec build/tools/vkpaged/vkpaged demo "$@"
