#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the Python package (python/) and installs it into a virtual environment in
# build/python-venv, which sees the system's site-packages (Debian's numpy, pytest, pybind11),
# offline (pip --no-index --no-build-isolation); then runs its tests (python/tests) and the
# package's examples (examples/python/engine_step.py and replay_step.py, every cache layout; the
# replays share one pipeline cache file, each run loading what the one before saved). Installs
# what is missing first, like scripts/install-deps.sh.
#
# The package compiles the library from this checkout, unless VKPAGED_PREFIX names an installed
# vkpaged (cmake --install) whose static library it then links: scripts/test.sh passes the one
# scripts/examples.sh has just installed into build/install. VKPAGED_PYTHON names the Python
# (default: the system's, /usr/bin/python3, whose packages install-deps.sh installed).
set -euo pipefail
if [ -n "${VKPAGED_PREFIX:-}" ]; then  # relative to where this was called from
  VKPAGED_PREFIX="$(cd "$VKPAGED_PREFIX" && pwd)"
  export VKPAGED_PREFIX
fi
cd "$(dirname "$0")/.."
scripts/install-deps.sh
python="${VKPAGED_PYTHON:-/usr/bin/python3}"
venv=build/python-venv
[ -x "$venv/bin/python" ] || "$python" -m venv --system-site-packages "$venv"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}"
fi

start=$SECONDS
"$venv/bin/python" -m pip install --quiet --no-index --no-build-isolation ./python
echo "vkpaged: Python package built and installed in $((SECONDS - start)) s" >&2

# From the checkout's root, so that `import vkpaged` finds the installed package, not python/vkpaged.
"$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests
pipelines="$venv/pipeline-cache.bin"
rm -f "$pipelines"
for layout in vllm nhd hnd; do
  "$venv/bin/python" examples/python/engine_step.py --layout "$layout"
  "$venv/bin/python" examples/python/replay_step.py --layout "$layout" --pipeline-cache "$pipelines"
done
