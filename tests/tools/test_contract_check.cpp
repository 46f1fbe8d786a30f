// SPDX-License-Identifier: Apache-2.0
// Keeps tests/tools/contract_check.py (an independent NumPy implementation of the contract,
// run against `vkpaged attend`) in CI. Skipped without the CLI or without Python + NumPy.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/test_paths.hpp"

namespace {

using vkpaged::test::python_has_numpy;
using vkpaged::test::python_path;

TEST(ContractCheck, RandomCasesMatchTheIndependentImplementation) {
  const std::string cli = vkpaged::test::cli_path();
  if (cli.empty()) GTEST_SKIP() << "no vkpaged CLI: VKPAGED_CLI is not set and none was built beside the tests";
  if (!python_has_numpy()) GTEST_SKIP() << python_path() << " with NumPy is not available (apt-get install python3-numpy)";
  // Copied beside the test binary at build time (tests/CMakeLists.txt).
  const auto script = vkpaged::test::test_data_path("contract_check.py");
  ASSERT_TRUE(std::filesystem::exists(script)) << script;

  const std::string command = "'" + python_path() + "' '" + script.string() + "' '" + cli + "' --count 40 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) output.append(buffer, n);
  const int status = pclose(pipe);
  EXPECT_EQ(status, 0) << output;
  EXPECT_NE(output.find("contract_check: "), std::string::npos) << output;
  EXPECT_NE(output.find(" 0 failed"), std::string::npos) << output;
}

}  // namespace
