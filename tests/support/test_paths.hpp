// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the test binary reads and runs, found relative to the binary itself (/proc/self/exe):
// tests/CMakeLists.txt copies the files beside it at build time and records where the CLI is
// built from there, so that a build folder carried to another machine, at another path, runs
// without the source tree.
#include <filesystem>
#include <string>
#include <string_view>

namespace vkpaged::test {

// The folder holding the running test binary.
std::filesystem::path test_binary_dir();

// A file of the source tree's tests/ that the build copied beside the binary (by its name).
std::filesystem::path test_data_path(std::string_view name);

// The vkpaged CLI: VKPAGED_CLI when set (ctest sets it), else the CLI of the same build found
// from the test binary; "" when neither exists.
std::string cli_path();

}  // namespace vkpaged::test
