// SPDX-License-Identifier: Apache-2.0
// `vkpaged bench --json` (bench_json.cpp, json_file.hpp): names with quotes, backslashes,
// control characters and non-ASCII text come back unchanged through a JSON parser (nlohmann's).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench_run.hpp"
#include "json_file.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::cli {
namespace {

namespace fs = std::filesystem;

// Every character JSON must escape, a few it may leave, and UTF-8 of two, three and four bytes.
const std::string kHostile = std::string("q\"uote \\back\\slash \b\f\n\r\t ctl\x01\x1f del\x7f ") +
                             "caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x9a\x80 end";

class BenchJsonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() / ("vkpaged_bench_json_" + std::to_string(::getpid()) + "_" + info->name());
  }
  void TearDown() override { fs::remove(path_); }
  nlohmann::json read_back() const {
    std::ifstream f(path_);
    std::stringstream text;
    text << f.rdbuf();
    return nlohmann::json::parse(text.str());  // throws on anything that is not JSON
  }
  fs::path path_;
};

TEST_F(BenchJsonTest, NamesRoundTripThroughAParser) {
  DeviceInfo dev;
  dev.name = "GPU " + kHostile;
  dev.driver = kHostile;
  BenchJsonRun run;
  run.bandwidth = 4.5e12;
  BenchResult r;
  r.suite = "suite " + kHostile;
  r.config.name = "case " + kHostile;
  r.path = "path " + kHostile;
  r.skipped = "skipped " + kHostile;
  r.median_us = 12.5;
  const std::vector<SuiteRun> suites{{r.suite, 1, 4.5e12, 4.4e12, false}};
  const std::vector<CaseRounds> rounds{{r.suite, r.config.name, {12.5}, {4.4e12}, 0.0, false}};
  write_bench_json(path_.string(), dev, run, {r}, suites, rounds);

  const nlohmann::json j = read_back();
  EXPECT_EQ(j.at("device"), dev.name);
  EXPECT_EQ(j.at("driver"), dev.driver);
  EXPECT_EQ(j.at("suite_runs").at(0).at("suite"), r.suite);
  EXPECT_EQ(j.at("case_rounds").at(0).at("suite"), r.suite);
  EXPECT_EQ(j.at("case_rounds").at(0).at("name"), r.config.name);
  const nlohmann::json& c = j.at("cases").at(0);
  EXPECT_EQ(c.at("suite"), r.suite);
  EXPECT_EQ(c.at("name"), r.config.name);
  EXPECT_EQ(c.at("path"), r.path);
  EXPECT_EQ(c.at("skipped"), r.skipped);
  EXPECT_EQ(c.at("median_us"), 12.5);
  EXPECT_EQ(c.at("cache_dtype"), "f16");
  EXPECT_EQ(j.at("read_bandwidth_bytes_per_second"), 4.5e12);
}

// A driver's name need not be UTF-8: the file stays JSON, with U+FFFD in place of the bad byte.
TEST_F(BenchJsonTest, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  Json document;
  document["device"] = std::string("bad \xff byte");
  write_json_file(path_.string(), document);
  EXPECT_EQ(read_back().at("device"), "bad \xef\xbf\xbd byte");
}

TEST_F(BenchJsonTest, AnUnwritablePathIsAnIoErrorNamingIt) {
  const std::string path = (path_ / "no" / "such" / "folder.json").string();
  try {
    write_json_file(path, Json::object());
    ADD_FAILURE() << "not refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::io_error);
    EXPECT_EQ(std::string(e.what()), "--json: cannot write " + path);
  }
}

}  // namespace
}  // namespace vkpaged::cli
