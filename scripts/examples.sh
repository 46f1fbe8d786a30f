#!/usr/bin/env bash
# Installs vkpaged into build/install as a package, then builds the C, C++ and Rust examples
# in examples/ against that install (as a user's project would) and runs each, and the Python
# one (ctypes) on the installed library, on the default Vulkan device. Each checks its output
# against the CPU reference (Python: against the contract's math); this exits non-zero when
# one fails. Installs what is missing first (rustc too), like scripts/install-deps.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if ! command -v rustc >/dev/null 2>&1; then
  as_root=()
  [ "$(id -u)" -ne 0 ] && as_root=(sudo)
  echo "vkpaged: installing rustc" >&2
  "${as_root[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends rustc >/dev/null
fi

[ -f build/CMakeCache.txt ] || cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
prefix="$PWD/build/install"
cmake --install build --prefix "$prefix" >/dev/null
libdir="$(dirname "$(find "$prefix" -name 'libvkpaged.so' | head -n 1)")"

for lang in c cpp; do
  cmake -S "examples/$lang" -B "build/examples/$lang" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  cmake --build "build/examples/$lang" -j"$(nproc)" >/dev/null
done
mkdir -p build/examples/rust
rustc --edition 2021 -O examples/rust/src/main.rs -o build/examples/rust/vkpaged_rust_example \
  -L "native=$libdir" -l dylib=vkpaged -C "link-arg=-Wl,-rpath,$libdir"

failed=0
for example in c/vkpaged_c_example cpp/vkpaged_cpp_example rust/vkpaged_rust_example; do
  "build/examples/$example" || failed=1
done
python3 examples/python/decode_example.py "$libdir/libvkpaged.so" || failed=1
exit "$failed"
