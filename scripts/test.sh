#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds vkpaged and runs the whole test suite (validation layer on) on the default device.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 600
../scripts/examples.sh
# The Python package, on the library examples.sh installed into build/install.
VKPAGED_PREFIX="$PWD/install" ../scripts/python.sh
../scripts/sanitize.sh
../scripts/fuzz.sh
