// SPDX-License-Identifier: Apache-2.0
// Context creation: device choice, adopting an engine's device, the reduction fallback, and
// timing work after untimed work in one command buffer.
#include <gtest/gtest.h>

#include "support/decode_case.hpp"
#include "support/test_context.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/reference.hpp"
#include "vkpaged/utilities.hpp"
#include "vk/context_impl.hpp"

namespace vkpaged::test {
namespace {

class ContextTest : public GpuTest {};

TEST_F(ContextTest, ListsDevicesAndChoosesByIndexOrName) {
  const DeviceList list = list_devices();
  ASSERT_FALSE(list.devices.empty());
  ASSERT_LT(list.default_index, list.devices.size());
  ContextOptions by_index = test_context_options();
  by_index.device = std::to_string(list.default_index);
  Context a(by_index);
  EXPECT_EQ(a.device_info().name, list.devices[list.default_index].name);
  ContextOptions by_name = test_context_options();
  by_name.device = list.devices[0].name.substr(0, 4);
  Context b(by_name);
  EXPECT_EQ(b.device_info().name.substr(0, 4), by_name.device);
}

TEST_F(ContextTest, RefusesUnknownDevices) {
  ContextOptions o = test_context_options();
  o.device = "no such device at all";
  try {
    Context c(o);
    ADD_FAILURE() << "not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no Vulkan device name contains \"no such device at all\""), std::string::npos)
        << e.what();
  }
  o.device = "999";
  EXPECT_THROW(Context c(o), Error);
}

// An engine's instance and device, adopted: vkpaged runs on them and destroys neither.
TEST_F(ContextTest, AdoptsAnExternalDevice) {
  ExternalDevice ext;
  ext.instance = ctx().instance();
  ext.physical_device = ctx().physical_device();
  ext.device = ctx().device();
  ext.queue_family = ctx().queue_family();
  DecodeCase c;
  c.lens = {3, 40, 129};
  std::mt19937 rng(11);
  const DecodeInputs in = make_decode_inputs(c, rng);
  {
    Context adopted(ext);
    EXPECT_EQ(adopted.device(), ctx().device());
    const auto got = decode_attention(adopted, in);
    EXPECT_LE(max_abs_diff(got.output, reference::decode_attention(in).output), tolerance(c.query_dtype, c.cache_dtype));
  }
  // The owner's device still works after the adopting context is gone.
  const auto again = decode_attention(ctx(), in);
  EXPECT_LE(max_abs_diff(again.output, reference::decode_attention(in).output), tolerance(c.query_dtype, c.cache_dtype));
  ext.device = VK_NULL_HANDLE;
  EXPECT_THROW(Context bad(ext), Error);
}

// The shared-memory reductions, which devices without subgroup arithmetic use.
TEST_F(ContextTest, SharedMemoryReductionPathMatchesReference) {
  ContextOptions o = test_context_options();
  o.disable_subgroup_arithmetic = true;
  Context plain(o);
  EXPECT_FALSE(plain.device_info().subgroup_arithmetic);
  DecodeCase c;
  c.heads = 8;
  c.kv_heads = 2;
  c.lens = {0, 1, 17, 300, 1100};
  c.sinks = true;
  std::mt19937 rng(12);
  const DecodeInputs in = make_decode_inputs(c, rng);
  for (SplitMode mode : {SplitMode::single_pass, SplitMode::split}) {
    DecodeOptions opt;
    opt.split = mode;
    const auto got = decode_attention(plain, in, opt, {}, true);
    const auto want = reference::decode_attention(in, opt, {}, true);
    EXPECT_LE(max_abs_diff(got.output, want.output), tolerance(c.query_dtype, c.cache_dtype));
    EXPECT_LE(max_abs_diff(got.lse, want.lse), 1e-3);
  }
  EXPECT_EQ(plain.validation_message_count(), 0u);
}

// run_and_time with untimed work before: that work runs first, finishes before the timed work
// starts (the timed copy reads what it wrote), and is not counted.
TEST_F(ContextTest, RunAndTimeAfterUntimedWorkTimesOnlyTheSecondPart) {
  if (!ctx().device_info().timestamps) GTEST_SKIP() << "no timestamps on " << ctx().device_info().name;
  const auto& d = ctx().impl().d;
  constexpr uint32_t kWords = 1024;
  auto source = ctx().create_buffer(kWords * 4), target = ctx().create_buffer(kWords * 4);
  const StreamingRead heavy(ctx(), size_t(64) << 20);
  auto before = [&](VkCommandBuffer cmd) {
    heavy.record(cmd);
    d.vkCmdFillBuffer(cmd, source.handle(), 0, kWords * 4, 0x5eed1234u);
  };
  auto copy = [&](VkCommandBuffer cmd) {
    const VkBufferCopy region{0, 0, kWords * 4};
    d.vkCmdCopyBuffer(cmd, source.handle(), target.handle(), 1, &region);
  };
  const double copy_ns = ctx().run_and_time(copy, before);
  std::vector<uint32_t> got(kWords);
  ctx().download(target.view(), got.data(), kWords * 4);
  EXPECT_EQ(got, std::vector<uint32_t>(kWords, 0x5eed1234u));
  const double heavy_ns = ctx().run_and_time([&](VkCommandBuffer cmd) { heavy.record(cmd); });
  EXPECT_GE(copy_ns, 0.0);
  EXPECT_LT(copy_ns, heavy_ns / 2) << "a 4 KB copy timed " << copy_ns << " ns after a 64 MB read of " << heavy_ns;
}

}  // namespace
}  // namespace vkpaged::test
