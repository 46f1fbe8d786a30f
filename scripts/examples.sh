#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs vkpaged into build/install as a package, then builds the C, C++ and Rust examples
# in examples/ against that install (as a user's project would) and runs each, and the Python
# one (ctypes) on the installed library, on the default Vulkan device. Then the C++ consumers
# of examples/consumers: on the compiler's default C++ standard, the installed package through
# find_package (shared library with fmt hidden, static library), and this source tree through
# add_subdirectory and through FetchContent; and the installed package from a consumer built as
# C++17 and one built as C++20. Each checks its output against the CPU reference
# (Python: against the contract's math); this exits non-zero when one fails. Installs what is
# missing first (rustc too), like scripts/install-deps.sh.
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

# The consumers. add_subdirectory and FetchContent compile the library again: with the
# consumer's build type left empty (no optimisation, no debug information: the cheapest to
# compile; the decode runs in the shaders) and only the consumer's target built.
consumers=build/examples/consumers
cmake -S examples/consumers/find_package -B "$consumers/find_package_shared" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON >/dev/null
cmake -S examples/consumers/find_package -B "$consumers/find_package_static" -DCMAKE_PREFIX_PATH="$prefix" \
  -DVKPAGED_CONSUMER_STATIC=ON >/dev/null
cmake -S examples/consumers/add_subdirectory -B "$consumers/add_subdirectory" >/dev/null
cmake -S examples/consumers/fetch_content -B "$consumers/fetch_content" >/dev/null
for standard in 17 20; do  # the public headers are C++17; the consumer may be either
  cmake -S examples/consumers/cxx_standard -B "$consumers/cxx$standard" -DCMAKE_PREFIX_PATH="$prefix" \
    -DVKPAGED_CONSUMER_STANDARD="$standard" -DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON >/dev/null
done
for consumer in find_package_shared/vkpaged_consumer find_package_static/vkpaged_consumer \
                add_subdirectory/consumer fetch_content/consumer cxx17/vkpaged_consumer cxx20/vkpaged_consumer; do
  cmake --build "$consumers/$(dirname "$consumer")" --target "$(basename "$consumer")" -j"$(nproc)" >/dev/null
done

failed=0
for example in c/vkpaged_c_example cpp/vkpaged_cpp_example rust/vkpaged_rust_example \
               consumers/find_package_shared/vkpaged_consumer consumers/find_package_static/vkpaged_consumer \
               consumers/add_subdirectory/consumer consumers/fetch_content/consumer \
               consumers/cxx17/vkpaged_consumer consumers/cxx20/vkpaged_consumer; do
  "build/examples/$example" || failed=1
done
python3 examples/python/decode_example.py "$libdir/libvkpaged.so" || failed=1
exit "$failed"
