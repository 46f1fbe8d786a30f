#!/usr/bin/env bash
# Configures and builds vkpaged in ./build (Release) after installing what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
