// SPDX-License-Identifier: Apache-2.0
// `vkpaged attend --mla-cache C.npy --value-head-size Dv` and `--ckv-cache --kpe-cache`: the
// command in process against reference::mla_attention on the device and the CPU, and its
// refusals, each naming the option, with no output file left behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <utility>

#include "commands.hpp"
#include "npy.hpp"
#include "support/attention_case.hpp"
#include "support/decode_case.hpp"
#include "support/mla_case.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::cli {
namespace {

namespace fs = std::filesystem;

// A scratch folder holding one MLA case as .npy files, and the arguments that name them.
class MlaFiles {
 public:
  explicit MlaFiles(const std::string& name) : dir_(fs::temp_directory_path() / ("vkpaged_attend_mla_" + name)) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~MlaFiles() { fs::remove_all(dir_); }
  std::string write(const std::string& name, const HostTensor& t) {
    const std::string path = (dir_ / (name + ".npy")).string();
    write_npy(path, t);
    return path;
  }
  AttendArgs args_for(const MlaInputs& in) {
    AttendArgs a;
    a.query = write("query", in.query);
    if (!in.mla_cache.empty()) a.mla_cache = write("mla_cache", in.mla_cache);
    if (!in.ckv_cache.empty()) a.ckv_cache = write("ckv_cache", in.ckv_cache);
    if (!in.kpe_cache.empty()) a.kpe_cache = write("kpe_cache", in.kpe_cache);
    a.value_head_size = in.value_head_size;
    a.block_tables = write("block_tables", in.block_tables);
    a.context_lens = write("context_lens", in.context_lens);
    a.query_starts = write("query_starts", in.query_starts);
    if (!in.tree_mask.empty()) a.tree_mask = write("tree_mask", in.tree_mask);
    if (!in.sinks.empty()) a.sinks = write("sinks", in.sinks);
    a.sliding_window = in.sliding_window;
    a.out = (dir_ / "out.npy").string();
    a.lse = (dir_ / "lse.npy").string();
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

MlaInputs draw(MlaCacheForm form, uint32_t seed) {
  test::MlaCase c;
  c.value_head_size = 64;
  c.rope_head_size = 16;
  c.form = form;
  c.attention.heads = 3;
  c.attention.lens = {20, 5};
  c.attention.new_tokens = {4, 1};
  c.attention.tree_mask = test::TreeMask::tree;
  c.attention.sinks = true;
  c.attention.sliding_window = 9;
  std::mt19937 rng(seed);
  return test::make_mla_inputs(c, rng).mla;
}

TEST(AttendMla, BothCacheFormsMatchTheReferenceOnTheDeviceAndTheCpu) {
  for (MlaCacheForm form : {MlaCacheForm::one_pool, MlaCacheForm::two_pools}) {
    const MlaInputs in = draw(form, 7 + uint32_t(form));
    const AttentionResult want = reference::mla_attention(in, {}, true);
    // The device's automatic kernel and its portable one by name (--kernel scalar), and the CPU.
    for (auto [device, kernel] : {std::pair{"", "auto"}, std::pair{"", "scalar"}, std::pair{"cpu", "auto"}}) {
      MlaFiles files(std::string("forms") + device + kernel);
      AttendArgs args = files.args_for(in);
      args.device = device;
      args.kernel = kernel;
      std::string error;
      ASSERT_EQ(attend(args, error), 0) << error;
      const HostTensor out = read_npy(args.out);
      EXPECT_EQ(out.shape(), (Shape{5, 3, 64}));  // [T, H, Dv]
      test::expect_attention_near({out, read_npy(args.lse)}, want, test::tolerance(DType::f16, DType::f16), true,
                                  std::string(form == MlaCacheForm::one_pool ? "one pool" : "two pools") + " on " +
                                      (*device ? device : "the device") + " --kernel " + kernel);
    }
  }
}

TEST(AttendMla, RefusesCacheOptionsOfNoOneFormNamingTheOption) {
  const MlaInputs in = draw(MlaCacheForm::one_pool, 9);
  MlaFiles files("refusals");
  const AttendArgs good = files.args_for(in);
  struct Bad {
    const char* what;
    AttendArgs args;
    const char* message;
  };
  std::vector<Bad> bad;
  AttendArgs a = good;
  a.value_head_size = 0;
  bad.push_back({"no Dv", a, "vkpaged: --value-head-size: not given"});
  a = good;
  a.key_cache = a.mla_cache;
  bad.push_back({"both forms", a, "vkpaged: --key-cache: given with --mla-cache"});
  a = good;
  a.ckv_cache = a.mla_cache;
  bad.push_back({"one pool and two", a, "vkpaged: --ckv-cache: given with --mla-cache"});
  a = good;
  a.mla_cache.clear();
  a.value_head_size = 0;
  a.ckv_cache = good.mla_cache;
  bad.push_back({"half of two pools", a, "vkpaged: --kpe-cache: not given, but --ckv-cache is"});
  a = good;
  a.value_head_size = 36;  // the reference takes it; the kernel takes multiples of 8
  bad.push_back({"Dv the kernel refuses", a, "vkpaged: --value-head-size: value_head_size: Dv = 36"});
  a = good;
  a.value_head_size = 81;
  a.device = "cpu";
  bad.push_back({"Dv past Dk", a, "vkpaged: --value-head-size: value_head_size: Dv = 81 is outside [1, Dk = 80]"});
  a = good;
  a.kernel = "matrix-khr";  // MLA's kernels: auto, scalar or matrix
  bad.push_back({"a decode kernel", a, "vkpaged: --kernel: 'matrix-khr' is not auto, scalar or matrix"});
  a = good;
  a.kv_layout = "hnd";
  bad.push_back({"hnd", a, "vkpaged: --kv-layout: hnd with an MLA cache"});
  for (const Bad& b : bad) {
    std::string error;
    EXPECT_EQ(attend(b.args, error), 1) << b.what;
    EXPECT_EQ(error.rfind(b.message, 0), 0u) << b.what << ": " << error;
    EXPECT_EQ(std::count(error.begin(), error.end(), '\n'), 1) << b.what << ": one line: " << error;
    EXPECT_FALSE(fs::exists(b.args.out)) << b.what << ": an output file was left behind";
  }
}

}  // namespace
}  // namespace vkpaged::cli
