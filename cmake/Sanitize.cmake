# SPDX-License-Identifier: Apache-2.0
# VKPAGED_SANITIZE=ON builds everything configured after this with AddressSanitizer and
# UndefinedBehaviorSanitizer, stopping at the first report (-fno-sanitize-recover=all).
# scripts/sanitize.sh uses it to build and run vkpaged_host_tests (the GPU-free tests); the
# GPU tests are not run under it (lavapipe is slow under ASan and LLVM trips LeakSanitizer).
option(VKPAGED_SANITIZE "Build with -fsanitize=address,undefined" OFF)
if(VKPAGED_SANITIZE)
  set(VKPAGED_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_compile_options(${VKPAGED_SANITIZE_FLAGS})
  add_link_options(${VKPAGED_SANITIZE_FLAGS})
endif()
