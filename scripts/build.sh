#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Configures and builds vkpaged in ./build (Release) after installing what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# The KHR matrix kernels' shaders are required here (install-deps.sh provided their compiler);
# VKPAGED_KHR_SHADERS=OFF builds without them.
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DVKPAGED_KHR_SHADERS="${VKPAGED_KHR_SHADERS:-ON}" >/dev/null
cmake --build build -j"$(nproc)"
