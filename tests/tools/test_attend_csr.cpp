// SPDX-License-Identifier: Apache-2.0
// `vkpaged attend --kv-indptr --kv-indices --kv-last-page-len`: FlashInfer's CSR page tables in
// place of --block-tables and --context-lens, run in process: the dense form's output byte for
// byte (decode and --query-starts, device and --device cpu), and the refusals (mixed or
// incomplete forms, values that break the contract), each one line naming the option and the
// value, with no output file left.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "npy.hpp"
#include "support/attention_case.hpp"
#include "support/csr_tables.hpp"
#include "support/decode_case.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::cli {
namespace {

namespace fs = std::filesystem;
constexpr uint32_t kB = 8;

class CsrFiles {
 public:
  explicit CsrFiles(const std::string& name) : dir_(fs::temp_directory_path() / ("vkpaged_attend_csr_" + std::to_string(::getpid()) + "_" + name)) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~CsrFiles() { fs::remove_all(dir_); }
  std::string write(const std::string& name, const HostTensor& t) {
    const std::string path = (dir_ / (name + ".npy")).string();
    write_npy(path, t);
    return path;
  }
  std::string path(const std::string& name) const { return (dir_ / (name + ".npy")).string(); }

  // Every array of the call, the page tables in both forms; the arguments take the dense one.
  AttendArgs args_for(const DecodeInputs& in, const HostTensor& query_starts = {}) {
    const test::CsrTables t = test::to_csr(in.block_tables, in.context_lens, kB);
    AttendArgs a;
    a.query = write("query", in.query);
    a.key_cache = write("key_cache", in.key_cache);
    a.value_cache = write("value_cache", in.value_cache);
    a.block_tables = write("block_tables", in.block_tables);
    a.context_lens = write("context_lens", in.context_lens);
    write("kv_indptr", t.kv_indptr);
    write("kv_indices", t.kv_indices);
    write("kv_last_page_len", t.kv_last_page_len);
    if (!query_starts.empty()) a.query_starts = write("query_starts", query_starts);
    a.kv_layout = std::string(kv_layout_name(in.kv_layout));
    a.out = path("out");
    return a;
  }
  // The same call on the CSR files.
  AttendArgs csr(AttendArgs a) const {
    a.block_tables = a.context_lens = "";
    a.kv_indptr = path("kv_indptr");
    a.kv_indices = path("kv_indices");
    a.kv_last_page_len = path("kv_last_page_len");
    a.out = path("out_csr");
    return a;
  }

 private:
  fs::path dir_;
};

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

DecodeInputs decode_inputs(KvLayout layout, std::vector<uint32_t> lens = {0, 1, 7, 8, 25}) {
  test::DecodeCase c;
  c.block_size = kB;
  c.lens = std::move(lens);
  std::mt19937 rng(80);
  return test::with_layout(test::make_decode_inputs(c, rng), layout);
}

// A refusal: exit 1, one line naming `parts`, no output file.
void expect_refused(const AttendArgs& args, std::initializer_list<std::string> parts) {
  std::string error;
  EXPECT_EQ(attend(args, error), 1);
  EXPECT_EQ(std::count(error.begin(), error.end(), '\n'), 1) << error;
  EXPECT_EQ(error.rfind("vkpaged: ", 0), 0u) << error;
  for (const auto& part : parts) EXPECT_NE(error.find(part), std::string::npos) << error << " does not name " << part;
  EXPECT_FALSE(fs::exists(args.out)) << args.out;
}

TEST(AttendCsr, DecodeGivesTheDenseFormsOutput) {
  for (const char* device : {"", "cpu"}) {
    const DecodeInputs in = decode_inputs(KvLayout::vllm);
    CsrFiles files(std::string("decode") + device);
    AttendArgs dense = files.args_for(in);
    dense.device = device;
    std::string error;
    ASSERT_EQ(attend(dense, error), 0) << error;
    const AttendArgs csr = files.csr(dense);
    ASSERT_EQ(attend(csr, error), 0) << error;
    EXPECT_TRUE(bytes_equal(read_npy(csr.out), read_npy(dense.out))) << device;
    if (std::string(device) == "cpu")
      EXPECT_TRUE(bytes_equal(read_npy(csr.out), reference::decode_attention(in).output));
  }
}

TEST(AttendCsr, MultiQueryGivesTheDenseFormsOutput) {
  test::AttentionCase c;
  c.block_size = kB;
  c.layout = KvLayout::nhd;
  c.lens = {1, 8, 30};
  c.new_tokens = {1, 8, 5};
  std::mt19937 rng(81);
  const AttentionInputs a = test::make_attention_inputs(c, rng);
  DecodeInputs in;  // the arrays args_for writes
  in.query = a.query;
  in.key_cache = a.key_cache;
  in.value_cache = a.value_cache;
  in.block_tables = a.block_tables;
  in.context_lens = a.context_lens;
  in.kv_layout = a.kv_layout;
  CsrFiles files("multi_query");
  const AttendArgs dense = files.args_for(in, a.query_starts);
  std::string error;
  ASSERT_EQ(attend(dense, error), 0) << error;
  const AttendArgs csr = files.csr(dense);
  ASSERT_EQ(attend(csr, error), 0) << error;
  EXPECT_TRUE(bytes_equal(read_npy(csr.out), read_npy(dense.out)));
  // Single tokens on the hnd layout (multi-query attention without --query-starts: each request
  // holds its token, so a page at least).
  CsrFiles hnd("hnd");
  const AttendArgs single = hnd.args_for(decode_inputs(KvLayout::hnd, {1, 7, 8, 25}));
  ASSERT_EQ(attend(single, error), 0) << error;
  ASSERT_EQ(attend(hnd.csr(single), error), 0) << error;
  EXPECT_TRUE(bytes_equal(read_npy(hnd.csr(single).out), read_npy(single.out)));
}

TEST(AttendCsr, OneFormCompleteOrARefusal) {
  CsrFiles files("forms");
  const AttendArgs dense = files.args_for(decode_inputs(KvLayout::vllm));
  const AttendArgs csr = files.csr(dense);
  AttendArgs both = csr;
  both.block_tables = dense.block_tables;
  expect_refused(both, {"--block-tables: " + dense.block_tables + " given with --kv-indptr " + csr.kv_indptr});
  both = csr;
  both.context_lens = dense.context_lens;
  expect_refused(both, {"--context-lens: " + dense.context_lens + " given with --kv-indptr"});
  AttendArgs partial = csr;
  partial.kv_last_page_len = "";
  expect_refused(partial, {"--kv-last-page-len: not given, but --kv-indptr " + csr.kv_indptr + " is"});
  partial = csr;
  partial.kv_indptr = "";
  expect_refused(partial, {"--kv-indptr: not given, but --kv-indices " + csr.kv_indices + " is"});
  AttendArgs neither = csr;
  neither.kv_indptr = neither.kv_indices = neither.kv_last_page_len = "";
  expect_refused(neither, {"--block-tables: not given"});
  neither = dense;
  neither.context_lens = "";
  neither.out = csr.out;
  expect_refused(neither, {"--context-lens: not given"});
}

TEST(AttendCsr, BadValuesNameTheOption) {
  const DecodeInputs in = decode_inputs(KvLayout::vllm);  // kv_indptr {0, 0, 1, 2, 3, 7}
  CsrFiles files("values");
  const AttendArgs csr = files.csr(files.args_for(in));
  test::CsrTables t = test::to_csr(in.block_tables, in.context_lens, kB);
  auto with = [&](const test::CsrTables& changed) {
    files.write("kv_indptr", changed.kv_indptr);
    files.write("kv_indices", changed.kv_indices);
    files.write("kv_last_page_len", changed.kv_last_page_len);
    return csr;
  };
  test::CsrTables bad = t;
  bad.kv_indptr.as<int32_t>()[2] = 2;
  bad.kv_indptr.as<int32_t>()[3] = 1;  // {0, 0, 2, 1, 3, 7}
  expect_refused(with(bad), {"--kv-indptr: kv_indptr[3]: 1 is less than kv_indptr[2] = 2"});
  bad = t;
  bad.kv_indices.as<int32_t>()[0] = int32_t(in.key_cache.shape()[0]);
  expect_refused(with(bad), {"--kv-indices: kv_indices[0]: block id " + std::to_string(in.key_cache.shape()[0])});
  bad = t;
  bad.kv_last_page_len.as<int32_t>()[4] = int32_t(kB) + 1;
  expect_refused(with(bad), {"--kv-last-page-len: kv_last_page_len[4]: 9 is outside [1, B = 8]"});
  bad = t;
  bad.kv_last_page_len.as<int32_t>()[0] = 1;
  expect_refused(with(bad), {"--kv-last-page-len: kv_last_page_len[0]: 1 is not 0"});
  std::string error;
  ASSERT_EQ(attend(with(t), error), 0) << error;
}

}  // namespace
}  // namespace vkpaged::cli
