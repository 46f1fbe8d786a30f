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

// The Python interpreter the tests run their scripts with: VKPAGED_PYTHON when set (scripts/gpu-test.sh
// names the first python3 on PATH, where a GPU machine keeps NumPy outside /usr/bin), else
// /usr/bin/python3.
std::string python_path();

// Whether python_path() exists and imports NumPy.
bool python_has_numpy();

}  // namespace vkpaged::test
