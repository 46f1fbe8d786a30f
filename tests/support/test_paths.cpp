// SPDX-License-Identifier: Apache-2.0
#include "support/test_paths.hpp"

#include <cstdlib>
#include <system_error>

// Both are set by tests/CMakeLists.txt, relative to the test binary's folder.
#ifndef VKPAGED_TEST_DATA_DIR
#error "VKPAGED_TEST_DATA_DIR is defined by tests/CMakeLists.txt"
#endif
#ifndef VKPAGED_TEST_CLI_FROM_TESTS
#error "VKPAGED_TEST_CLI_FROM_TESTS is defined by tests/CMakeLists.txt"
#endif

namespace vkpaged::test {

std::filesystem::path test_binary_dir() {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::filesystem::path() : self.parent_path();
}

std::filesystem::path test_data_path(std::string_view name) {
  return test_binary_dir() / VKPAGED_TEST_DATA_DIR / name;
}

std::string cli_path() {
  const char* env = std::getenv("VKPAGED_CLI");
  if (env != nullptr && *env != '\0') return env;
  const std::string_view relative = VKPAGED_TEST_CLI_FROM_TESTS;
  if (relative.empty()) return {};  // built without the CLI (VKPAGED_BUILD_TOOLS=OFF)
  std::error_code error;
  const auto cli = (test_binary_dir() / relative).lexically_normal();
  return std::filesystem::is_regular_file(cli, error) ? cli.string() : std::string();
}

std::string python_path() {
  const char* env = std::getenv("VKPAGED_PYTHON");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string("/usr/bin/python3");
}

bool python_has_numpy() {
  const std::string python = python_path();
  std::error_code error;
  if (!std::filesystem::exists(python, error)) return false;
  const std::string probe = "'" + python + "' -c 'import numpy' > /dev/null 2>&1";
  return std::system(probe.c_str()) == 0;
}

}  // namespace vkpaged::test
