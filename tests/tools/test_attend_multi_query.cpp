// SPDX-License-Identifier: Apache-2.0
// `vkpaged attend --query-starts / --tree-mask / --lse / --kv-layout`: the command in process
// against the library's reference, its refusals, and contract_check_multi_query.py (an
// independent NumPy implementation of the multi-query contract) run against the built CLI.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>

#include "commands.hpp"
#include "npy.hpp"
#include "support/attention_case.hpp"
#include "support/decode_case.hpp"
#include "support/test_paths.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::cli {
namespace {

namespace fs = std::filesystem;
using test::AttentionCase;

// A scratch folder of .npy files for one test.
class AttendFiles {
 public:
  explicit AttendFiles(const std::string& name) : dir_(fs::temp_directory_path() / ("vkpaged_attend_mq_" + std::to_string(::getpid()) + "_" + name)) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~AttendFiles() { fs::remove_all(dir_); }
  std::string write(const std::string& name, const HostTensor& t) {
    const std::string path = (dir_ / (name + ".npy")).string();
    write_npy(path, t);
    return path;
  }
  std::string path(const std::string& name) const { return (dir_ / (name + ".npy")).string(); }

  // The case's arrays, with --query-starts (and --tree-mask) unless `decode`.
  AttendArgs args_for(const AttentionInputs& in, bool decode = false) {
    AttendArgs a;
    a.query = write("query", in.query);
    a.key_cache = write("key_cache", in.key_cache);
    a.value_cache = write("value_cache", in.value_cache);
    a.block_tables = write("block_tables", in.block_tables);
    a.context_lens = write("context_lens", in.context_lens);
    if (!decode) a.query_starts = write("query_starts", in.query_starts);
    if (!in.tree_mask.empty()) a.tree_mask = write("tree_mask", in.tree_mask);
    if (!in.alibi_slopes.empty()) a.alibi_slopes = write("alibi", in.alibi_slopes);
    if (!in.sinks.empty()) a.sinks = write("sinks", in.sinks);
    a.kv_layout = std::string(kv_layout_name(in.kv_layout));
    a.sliding_window = in.sliding_window;
    a.out = path("out");
    a.lse = path("lse");
    if (in.query.dtype() == DType::bf16) a.dtype = "bf16";
    return a;
  }

 private:
  fs::path dir_;
};

// Runs the command as the CLI does: the exit status and the one line it would print.
int attend(const AttendArgs& args, std::string& error) {
  std::ostringstream err;
  const int status = run_reporting_errors([&] { return run_attend(args); }, err);
  error = err.str();
  return status;
}

bool bytes_equal(const HostTensor& a, const HostTensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && a.bytes() == b.bytes() &&
         std::equal(static_cast<const char*>(a.data()), static_cast<const char*>(a.data()) + a.bytes(),
                    static_cast<const char*>(b.data()));
}

TEST(AttendMultiQuery, CpuWritesTheReferencesOutputAndLse) {
  AttentionCase c;
  c.layout = KvLayout::hnd;
  c.tree_mask = test::TreeMask::tree;
  c.sinks = true;
  c.lens = {30, 6, 9};
  c.new_tokens = {5, 6, 1};
  std::mt19937 rng(3);
  AttentionInputs in = make_attention_inputs(c, rng);
  in.sliding_window = 12;
  AttendFiles files("cpu");
  AttendArgs args = files.args_for(in);
  args.device = "cpu";
  args.softcap = 2.0f;
  std::string error;
  ASSERT_EQ(attend(args, error), 0) << error;
  AttentionParams params;
  params.softcap = 2.0f;
  const AttentionResult want = reference::batch_attention(in, params, true);
  EXPECT_TRUE(bytes_equal(read_npy(args.out), want.output));
  EXPECT_TRUE(bytes_equal(read_npy(args.lse), want.lse));
  EXPECT_EQ(read_npy(args.lse).shape(), (Shape{12, 4}));  // [T, H]
}

TEST(AttendMultiQuery, DeviceMatchesTheReference) {
  AttentionCase c;
  c.layout = KvLayout::nhd;
  c.query_dtype = c.cache_dtype = DType::bf16;
  c.lens = {20, 3};
  c.new_tokens = {4, 3};
  c.alibi = true;
  std::mt19937 rng(4);
  const AttentionInputs in = make_attention_inputs(c, rng);
  AttendFiles files("device");
  const AttendArgs args = files.args_for(in);
  std::string error;
  ASSERT_EQ(attend(args, error), 0) << error;
  const AttentionResult want = reference::batch_attention(in, {}, true);
  test::expect_attention_near({read_npy(args.out, NpyReadOptions{true}), read_npy(args.lse)}, want,
                              test::tolerance(c.query_dtype, c.cache_dtype), true, c.str());
}

TEST(AttendMultiQuery, WithoutQueryStartsOneTokenPerRequest) {
  // On the vllm layout: the decode, with its LSE [S, H].
  AttentionCase c;
  c.lens = {17, 1, 40};
  c.new_tokens = {1, 1, 1};
  std::mt19937 rng(6);
  const AttentionInputs in = make_attention_inputs(c, rng);
  AttendFiles files("decode");
  AttendArgs args = files.args_for(in, /*decode=*/true);
  args.device = "cpu";
  std::string error;
  ASSERT_EQ(attend(args, error), 0) << error;
  const AttentionResult want = reference::batch_attention(in, {}, true);
  // The decode reference, against the multi-query one: the same numbers but for a last rounding.
  EXPECT_LE(test::max_abs_diff(read_npy(args.out), want.output), 1e-3);
  EXPECT_LE(test::max_abs_diff(read_npy(args.lse), want.lse), 1e-6);
  // On nhd and hnd: the same requests through the multi-query operator, on the device too
  // (which runs them on the scalar decode kernel).
  for (KvLayout layout : {KvLayout::nhd, KvLayout::hnd}) {
    c.layout = layout;
    std::mt19937 again(6);
    const AttentionInputs other = make_attention_inputs(c, again);
    AttendFiles layout_files(std::string(kv_layout_name(layout)));
    AttendArgs largs = layout_files.args_for(other, /*decode=*/true);
    ASSERT_EQ(attend(largs, error), 0) << error;
    const AttentionResult lwant = reference::batch_attention(other, {}, true);
    test::expect_attention_near({read_npy(largs.out), read_npy(largs.lse)}, lwant,
                                test::tolerance(c.query_dtype, c.cache_dtype), true, c.str());
  }
}

TEST(AttendMultiQuery, RefusalsNameTheOptionAndLeaveNoFile) {
  AttentionCase c;
  c.tree_mask = test::TreeMask::random;
  std::mt19937 rng(8);
  const AttentionInputs in = make_attention_inputs(c, rng);
  AttendFiles files("refusals");
  const AttendArgs good = files.args_for(in);
  auto refused = [&](auto edit, const std::string& needle) {
    AttendArgs args = good;
    args.device = "cpu";
    edit(args);
    std::string error;
    EXPECT_EQ(attend(args, error), 1) << needle;
    EXPECT_EQ(error.rfind("vkpaged: ", 0), 0u) << error;
    EXPECT_EQ(std::count(error.begin(), error.end(), '\n'), 1) << error;
    EXPECT_NE(error.find(needle), std::string::npos) << error;
    EXPECT_FALSE(fs::exists(args.out)) << needle;
    EXPECT_FALSE(fs::exists(args.lse)) << needle;
  };
  refused([](AttendArgs& a) { a.query_starts.clear(); }, "--tree-mask: needs --query-starts");
  refused([](AttendArgs& a) { a.kernel = "tensor"; }, "--kernel: 'tensor' is not auto, scalar or matrix");
  refused([](AttendArgs& a) { a.kv_layout = "nchw"; }, "--kv-layout: 'nchw' is not vllm, nhd or hnd");
  refused([&](AttendArgs& a) { a.query_starts = files.write("bad_starts", HostTensor(DType::i32, Shape{3})); },
          "--query-starts: query_starts[1]: 0 after query_starts[0] = 0");
  refused([&](AttendArgs& a) { a.tree_mask = files.write("bad_mask", HostTensor(DType::u8, Shape{4})); },
          "--tree-mask: tree_mask: shape [4]");
  refused([&](AttendArgs& a) { a.kv_layout = "nhd"; }, "--key-cache: key_cache: shape [");
}

// ---- the independent implementation ----

using vkpaged::test::python_has_numpy;
using vkpaged::test::python_path;

// Runs the script with `options`; its output, and whether it exited 0.
std::string run_script(const std::string& options, int& status) {
  const auto script = vkpaged::test::test_data_path("contract_check_multi_query.py");
  const std::string command =
      "'" + python_path() + "' '" + script.string() + "' '" + vkpaged::test::cli_path() + "' " + options + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "popen failed";
  std::string output;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) output.append(buffer, n);
  status = pclose(pipe);
  return output;
}

class ContractCheckMultiQuery : public ::testing::Test {
 protected:
  void SetUp() override {
    if (vkpaged::test::cli_path().empty())
      GTEST_SKIP() << "no vkpaged CLI: VKPAGED_CLI is not set and none was built beside the tests";
    if (!python_has_numpy()) GTEST_SKIP() << python_path() << " with NumPy is not available (apt-get install python3-numpy)";
  }
};

// Few cases on the device: each run of the CLI builds its pipelines anew, which lavapipe makes slow.
// 6 steps and one bad input of each of the 11 kinds.
TEST_F(ContractCheckMultiQuery, DeviceMatchesTheIndependentImplementation) {
  int status = -1;
  const std::string output = run_script("--count 6 --seed 3", status);
  EXPECT_EQ(status, 0) << output;
  EXPECT_NE(output.find("contract_check_multi_query: 17 passed, 0 failed"), std::string::npos) << output;
}

// MLA (the script's mla_attention, from the contract) on the CLI's MLA caches, one pool and two:
// the reference, then a few steps on the device (DeepSeek's Dk 576 among them).
TEST_F(ContractCheckMultiQuery, MlaMatchesTheIndependentImplementation) {
  int status = -1;
  const std::string output = run_script("--count 0 --bad 0 --mla 14 --seed 5 --device cpu", status);
  EXPECT_EQ(status, 0) << output;
  EXPECT_NE(output.find("contract_check_multi_query: 14 passed, 0 failed"), std::string::npos) << output;
}

TEST_F(ContractCheckMultiQuery, MlaDeviceMatchesTheIndependentImplementation) {
  int status = -1;
  const std::string output = run_script("--count 0 --bad 0 --mla 7 --seed 6", status);
  EXPECT_EQ(status, 0) << output;
  EXPECT_NE(output.find("contract_check_multi_query: 7 passed, 0 failed"), std::string::npos) << output;
}

TEST_F(ContractCheckMultiQuery, ReferenceMatchesTheIndependentImplementation) {
  int status = -1;
  const std::string output = run_script("--count 40 --seed 4 --bad 0 --device cpu", status);
  EXPECT_EQ(status, 0) << output;
  EXPECT_NE(output.find("contract_check_multi_query: 40 passed, 0 failed"), std::string::npos) << output;
}

}  // namespace
}  // namespace vkpaged::cli
