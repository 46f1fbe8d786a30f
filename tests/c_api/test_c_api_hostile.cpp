// SPDX-License-Identifier: Apache-2.0
// A hostile caller of the C API: NULL handles and pointers on every call, destroyed handles
// and handles of another type, struct sizes no release had, enum and boolean values outside
// their lists, negative and impossible counts, views outside the buffers vkpaged made. Every
// call must refuse with a message that names the argument, and never crash or write.
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "c_api/c_api_test_helpers.hpp"

namespace vkpaged::test {
namespace {

using namespace c_api_helpers;

// A value-returning call's failure as a status: its empty value and a message.
vkp_status value_failed(bool empty) {
  return empty && vkp_last_error()[0] != '\0' ? VKP_ERROR_INVALID_ARGUMENT : VKP_OK;
}

// A destroy's outcome as a status: whether it left a message.
vkp_status destroy_failed() { return vkp_last_error()[0] != '\0' ? VKP_ERROR_INVALID_ARGUMENT : VKP_OK; }

template <typename H>
using Calls = std::vector<std::pair<std::string, std::function<vkp_status(H*)>>>;

// Every call refuses NULL, a destroyed handle and one of another type, naming `arg`.
template <typename H>
void expect_refuses_bad_handles(const Calls<H>& calls, const std::string& arg, const std::string& type, H* dead,
                                H* foreign) {
  for (const auto& [function, call] : calls) {
    SCOPED_TRACE(function);
    expect_refused(call(nullptr), function + ": " + arg + " is NULL");
    expect_refused(call(dead), function + ": " + arg + ": ");
    EXPECT_NE(std::string(vkp_last_error()).find("is not a live " + type), std::string::npos) << vkp_last_error();
    expect_refused(call(foreign), "is not a live " + type);
  }
}

class CApiHostileTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    ctx_ = c_context();
    // The live objects first: the dead ones are destroyed last, so no live handle reuses
    // their memory.
    ASSERT_VKP_OK(vkp_buffer_create(ctx_, 256, VKP_MEMORY_HOST_VISIBLE, &buffer_));
    vkp_decode_shape_init(&shape_);
    shape_.num_seqs = 1;
    shape_.num_heads = 4;
    shape_.num_kv_heads = 4;
    shape_.head_size = 64;
    shape_.block_size = 16;
    shape_.num_blocks = 4;
    shape_.max_blocks_per_seq = 2;
    ASSERT_VKP_OK(vkp_decode_plan_create(ctx_, &shape_, nullptr, &plan_));
    vkp_attention_shape_init(&attention_shape_);
    attention_shape_.num_requests = 2;
    attention_shape_.num_query_tokens = 3;
    attention_shape_.num_heads = 4;
    attention_shape_.num_kv_heads = 2;
    attention_shape_.head_size = 64;
    attention_shape_.block_size = 16;
    attention_shape_.num_blocks = 4;
    attention_shape_.max_blocks_per_seq = 2;
    ASSERT_VKP_OK(vkp_attention_plan_create(ctx_, &attention_shape_, starts_, 3, nullptr, &attention_plan_));
    ASSERT_VKP_OK(vkp_block_manager_create(8, 16, nullptr, &manager_));
    vkp_kv_cache_shape_init(&cache_shape_);
    cache_shape_.num_kv_heads = 1;
    cache_shape_.head_size = 64;
    cache_options_ = kv_cache_options(4, 2);
    ASSERT_VKP_OK(vkp_kv_cache_create(ctx_, &cache_shape_, &cache_options_, &cache_));
    ASSERT_VKP_OK(vkp_streaming_read_create(ctx_, 4096, &read_));

    vkp_external_device ext = shared_device();
    ASSERT_VKP_OK(vkp_context_create_external(&ext, &dead_context_));
    ASSERT_VKP_OK(vkp_buffer_create(ctx_, 16, VKP_MEMORY_DEVICE, &dead_buffer_));
    ASSERT_VKP_OK(vkp_decode_plan_create(ctx_, &shape_, nullptr, &dead_plan_));
    ASSERT_VKP_OK(vkp_attention_plan_create(ctx_, &attention_shape_, starts_, 3, nullptr, &dead_attention_plan_));
    ASSERT_VKP_OK(vkp_block_manager_create(8, 16, nullptr, &dead_manager_));
    ASSERT_VKP_OK(vkp_kv_cache_create(ctx_, &cache_shape_, &cache_options_, &dead_cache_));
    ASSERT_VKP_OK(vkp_streaming_read_create(ctx_, 64, &dead_read_));
    vkp_context_destroy(dead_context_);
    vkp_buffer_destroy(dead_buffer_);
    vkp_decode_plan_destroy(dead_plan_);
    vkp_attention_plan_destroy(dead_attention_plan_);
    vkp_block_manager_destroy(dead_manager_);
    vkp_kv_cache_destroy(dead_cache_);
    vkp_streaming_read_destroy(dead_read_);
    ASSERT_STREQ(vkp_last_error(), "");
  }

  void TearDown() override {
    vkp_streaming_read_destroy(read_);
    vkp_kv_cache_destroy(cache_);
    vkp_block_manager_destroy(manager_);
    vkp_attention_plan_destroy(attention_plan_);
    vkp_decode_plan_destroy(plan_);
    vkp_buffer_destroy(buffer_);
    GpuTest::TearDown();
  }

  // Runs `checks` with a real command buffer (refused calls leave it valid and empty).
  template <typename Checks>
  void with_cmd(Checks&& checks) {
    EXPECT_VKP_OK(run(ctx_, [&](VkCommandBuffer cmd) {
      checks(cmd);
      return VKP_OK;
    }));
  }

  vkp_tensor_view whole(DType dtype, int64_t count) const {
    vkp_tensor_view t{};
    const int64_t dims[] = {count};
    EXPECT_VKP_OK(vkp_buffer_tensor(buffer_, vkp_dtype(dtype), dims, 1, 0, &t));
    return t;
  }

  vkp_context* ctx_ = nullptr;
  vkp_buffer* buffer_ = nullptr;
  vkp_decode_shape shape_{};
  vkp_decode_plan* plan_ = nullptr;
  // Two requests of 1 and 2 new tokens.
  const int32_t starts_[3] = {0, 1, 3};
  vkp_attention_shape attention_shape_{};
  vkp_attention_plan* attention_plan_ = nullptr;
  vkp_block_manager* manager_ = nullptr;
  vkp_kv_cache_shape cache_shape_{};
  vkp_kv_cache_options cache_options_{};
  vkp_kv_cache* cache_ = nullptr;
  vkp_streaming_read* read_ = nullptr;
  vkp_context* dead_context_ = nullptr;
  vkp_buffer* dead_buffer_ = nullptr;
  vkp_decode_plan* dead_plan_ = nullptr;
  vkp_attention_plan* dead_attention_plan_ = nullptr;
  vkp_block_manager* dead_manager_ = nullptr;
  vkp_kv_cache* dead_cache_ = nullptr;
  vkp_streaming_read* dead_read_ = nullptr;
};

vkp_status record_nothing(VkCommandBuffer, void*) { return VKP_OK; }

// A struct held for the duration of a call, passed as a pointer.
template <typename T>
struct WithSize {
  T value;
  operator T*() { return &value; }
};

TEST_F(CApiHostileTest, EveryHandleArgumentRefusesNullDestroyedAndForeignHandles) {
  vkp_device_info info;
  vkp_device_info_init(&info);
  vkp_vulkan_handles handles;
  vkp_vulkan_handles_init(&handles);
  vkp_decode_views views;
  vkp_decode_views_init(&views);
  vkp_decode_inputs inputs;
  vkp_decode_inputs_init(&inputs);
  vkp_reshape_and_cache_views reshape;
  vkp_reshape_and_cache_views_init(&reshape);
  vkp_gather_views gather;
  vkp_gather_views_init(&gather);
  vkp_merge_views merge;
  vkp_merge_views_init(&merge);
  vkp_layer_cache_views layer;
  vkp_layer_cache_views_init(&layer);
  vkp_bandwidth bandwidth;
  vkp_bandwidth_init(&bandwidth);
  vkp_decode_plan_info plan_info;
  vkp_decode_plan_info_init(&plan_info);
  vkp_decode_options options;
  vkp_decode_options_init(&options);
  vkp_kv_cache_info cache_info;
  vkp_kv_cache_info_init(&cache_info);
  vkp_kv_cache_sizing sizing;
  vkp_kv_cache_sizing_init(&sizing);
  vkp_append_result appended;
  vkp_append_result_init(&appended);
  vkp_block_usage usage;
  vkp_block_usage_init(&usage);
  vkp_prefix_cache_stats stats;
  vkp_prefix_cache_stats_init(&stats);
  vkp_attention_views attention_views;
  vkp_attention_views_init(&attention_views);
  vkp_attention_inputs attention_inputs;
  vkp_attention_inputs_init(&attention_inputs);
  vkp_attention_plan_info attention_info;
  vkp_attention_plan_info_init(&attention_info);
  vkp_attention_options attention_options;
  vkp_attention_options_init(&attention_options);
  vkp_attention_shape attention_shape = attention_shape_;
  vkp_rotary_views rotary_views;
  vkp_rotary_views_init(&rotary_views);
  vkp_rotary_inputs rotary;
  vkp_rotary_inputs_init(&rotary);
  vkp_new_tokens tokens;
  vkp_new_tokens_init(&tokens);
  vkp_decode_shape decode_shape = shape_;
  vkp_cooperative_matrix_shape matrix_shape;
  vkp_cooperative_matrix_shape_init(&matrix_shape);
  const vkp_host_tensor none{};
  vkp_host_tensor out_none{};
  const vkp_block_copy pair{0, 1};
  const vkp_tensor_view tensor = whole(DType::f32, 64);
  const vkp_buffer_view view = tensor.memory;
  uint32_t u = 0;
  int32_t i = 0;
  double ns = 0;
  vkp_bool32 b = VKP_FALSE;
  vkp_admission admission = VKP_ADMISSION_OK;
  const int32_t prompt[] = {1, 2, 3};
  const uint64_t ids[] = {1};
  float floats[64] = {};
  const vkp_block_copy* pairs_out = nullptr;
  const int32_t* table = nullptr;
  size_t count = 0;
  int64_t slots[1] = {};
  const int64_t dims[] = {4};

  vkp_mla_views mla_views;
  vkp_mla_views_init(&mla_views);
  vkp_mla_cache_form mla_form = VKP_MLA_ONE_POOL;
  with_cmd([&](VkCommandBuffer cmd) {
    vkp_buffer* made_buffer = nullptr;
    vkp_decode_plan* made_plan = nullptr;
    vkp_attention_plan* made_attention_plan = nullptr;
    vkp_kv_cache* made_cache = nullptr;
    vkp_streaming_read* made_read = nullptr;
    const Calls<vkp_context> context_calls = {
        {"vkp_context_device_info", [&](vkp_context* c) { return vkp_context_device_info(c, &info); }},
        {"vkp_context_vulkan_handles", [&](vkp_context* c) { return vkp_context_vulkan_handles(c, &handles); }},
        {"vkp_context_cooperative_matrix_shapes",
         [&](vkp_context* c) { return vkp_context_cooperative_matrix_shapes(c, &u, &matrix_shape); }},
        {"vkp_context_validation_message_count",
         [&](vkp_context* c) { return vkp_context_validation_message_count(c, &u); }},
        {"vkp_run_and_wait", [&](vkp_context* c) { return vkp_run_and_wait(c, record_nothing, nullptr); }},
        {"vkp_run_and_time", [&](vkp_context* c) { return vkp_run_and_time(c, record_nothing, nullptr, &ns); }},
        {"vkp_run_and_time_after",
         [&](vkp_context* c) { return vkp_run_and_time_after(c, record_nothing, nullptr, record_nothing, nullptr, &ns); }},
        {"vkp_record_compute_barrier", [&](vkp_context* c) { return vkp_record_compute_barrier(c, cmd); }},
        {"vkp_buffer_create", [&](vkp_context* c) { return vkp_buffer_create(c, 16, VKP_MEMORY_DEVICE, &made_buffer); }},
        {"vkp_upload", [&](vkp_context* c) { return vkp_upload(c, &view, floats, 4); }},
        {"vkp_download", [&](vkp_context* c) { return vkp_download(c, &view, floats, 4); }},
        {"vkp_decode_plan_create", [&](vkp_context* c) { return vkp_decode_plan_create(c, &shape_, nullptr, &made_plan); }},
        {"vkp_record_decode", [&](vkp_context* c) { return vkp_record_decode(c, cmd, plan_, &views, nullptr); }},
        {"vkp_record_decode_order", [&](vkp_context* c) { return vkp_record_decode_order(c, cmd, plan_, &tensor, &view); }},
        {"vkp_decode_attention",
         [&](vkp_context* c) {
           return vkp_decode_attention(c, &inputs, nullptr, nullptr, floats, sizeof(floats), nullptr, 0);
         }},
        {"vkp_attention_plan_create",
         [&](vkp_context* c) {
           return vkp_attention_plan_create(c, &attention_shape, starts_, 3, nullptr, &made_attention_plan);
         }},
        {"vkp_record_attention",
         [&](vkp_context* c) { return vkp_record_attention(c, cmd, attention_plan_, &attention_views, nullptr); }},
        {"vkp_batch_attention",
         [&](vkp_context* c) {
           return vkp_batch_attention(c, &attention_inputs, nullptr, nullptr, floats, sizeof(floats), nullptr, 0);
         }},
        {"vkp_record_rotary_embedding",
         [&](vkp_context* c) { return vkp_record_rotary_embedding(c, cmd, &rotary_views); }},
        {"vkp_record_reshape_and_cache_rotary",
         [&](vkp_context* c) { return vkp_record_reshape_and_cache_rotary(c, cmd, &reshape, &rotary, nullptr); }},
        {"vkp_rotary_embedding",
         [&](vkp_context* c) { return vkp_rotary_embedding(c, nullptr, nullptr, &none, &none, VKP_ROTARY_NEOX); }},
        {"vkp_record_streaming_read_of",
         [&](vkp_context* c) { return vkp_record_streaming_read_of(c, cmd, &view, &view); }},
        {"vkp_record_reshape_and_cache",
         [&](vkp_context* c) { return vkp_record_reshape_and_cache(c, cmd, &reshape, nullptr); }},
        {"vkp_record_copy_blocks", [&](vkp_context* c) { return vkp_record_copy_blocks(c, cmd, &layer, 1, &pair, 1); }},
        {"vkp_record_swap_blocks",
         [&](vkp_context* c) { return vkp_record_swap_blocks(c, cmd, &layer, 1, &layer, 1, &pair, 1); }},
        {"vkp_record_gather", [&](vkp_context* c) { return vkp_record_gather(c, cmd, &gather, nullptr); }},
        {"vkp_record_absmax", [&](vkp_context* c) { return vkp_record_absmax(c, cmd, &tensor, &view); }},
        {"vkp_record_fill_random", [&](vkp_context* c) { return vkp_record_fill_random(c, cmd, &tensor, 1); }},
        {"vkp_measure_read_bandwidth",
         [&](vkp_context* c) { return vkp_measure_read_bandwidth(c, 1024, 1, &bandwidth); }},
        {"vkp_streaming_read_create", [&](vkp_context* c) { return vkp_streaming_read_create(c, 1024, &made_read); }},
        {"vkp_record_streaming_read", [&](vkp_context* c) { return vkp_record_streaming_read(c, cmd, read_); }},
        {"vkp_measure_streaming_read",
         [&](vkp_context* c) { return vkp_measure_streaming_read(c, read_, 1, &bandwidth); }},
        {"vkp_measure_streaming_read_after",
         [&](vkp_context* c) { return vkp_measure_streaming_read_after(c, read_, read_, 1, &bandwidth); }},
        {"vkp_record_merge_attention", [&](vkp_context* c) { return vkp_record_merge_attention(c, cmd, &merge); }},
        {"vkp_merge_attention",
         [&](vkp_context* c) { return vkp_merge_attention(c, &none, &none, &none, &none, &out_none, nullptr); }},
        {"vkp_kv_cache_create",
         [&](vkp_context* c) { return vkp_kv_cache_create(c, &cache_shape_, &cache_options_, &made_cache); }},
    };
    expect_refuses_bad_handles(context_calls, "context", "vkp_context", dead_context_,
                               reinterpret_cast<vkp_context*>(buffer_));
    EXPECT_EQ(made_buffer, nullptr);
    EXPECT_EQ(made_plan, nullptr);
    EXPECT_EQ(made_attention_plan, nullptr);
    EXPECT_EQ(made_cache, nullptr);
    EXPECT_EQ(made_read, nullptr);

    vkp_tensor_view tensor_out{};
    const Calls<vkp_buffer> buffer_calls = {
        {"vkp_buffer_handle", [&](vkp_buffer* h) { return value_failed(vkp_buffer_handle(h) == VK_NULL_HANDLE); }},
        {"vkp_buffer_size", [&](vkp_buffer* h) { return value_failed(vkp_buffer_size(h) == 0); }},
        {"vkp_buffer_mapped", [&](vkp_buffer* h) { return value_failed(vkp_buffer_mapped(h) == nullptr); }},
        {"vkp_buffer_view_of",
         [&](vkp_buffer* h) { return value_failed(vkp_buffer_view_of(h, 0, 4).buffer == VK_NULL_HANDLE); }},
        {"vkp_buffer_tensor",
         [&](vkp_buffer* h) { return vkp_buffer_tensor(h, VKP_DTYPE_F32, dims, 1, 0, &tensor_out); }},
    };
    expect_refuses_bad_handles(buffer_calls, "buffer", "vkp_buffer", dead_buffer_,
                               reinterpret_cast<vkp_buffer*>(plan_));

    const Calls<vkp_decode_plan> plan_calls = {
        {"vkp_decode_plan_info_get", [&](vkp_decode_plan* p) { return vkp_decode_plan_info_get(p, &plan_info); }},
        {"vkp_decode_plan_shape_get", [&](vkp_decode_plan* p) { return vkp_decode_plan_shape_get(p, &shape_); }},
        {"vkp_decode_plan_options_get", [&](vkp_decode_plan* p) { return vkp_decode_plan_options_get(p, &options); }},
        {"vkp_decode_plan_scratch_bytes",
         [&](vkp_decode_plan* p) { return value_failed(vkp_decode_plan_scratch_bytes(p) == 0); }},
        {"vkp_decode_plan_merge_counter_bytes",
         [&](vkp_decode_plan* p) { return value_failed(vkp_decode_plan_merge_counter_bytes(p) == 0); }},
        {"vkp_decode_plan_describe",
         [&](vkp_decode_plan* p) { return value_failed(std::string(vkp_decode_plan_describe(p)).empty()); }},
        {"vkp_record_decode", [&](vkp_decode_plan* p) { return vkp_record_decode(ctx_, cmd, p, &views, nullptr); }},
        {"vkp_record_decode_order",
         [&](vkp_decode_plan* p) { return vkp_record_decode_order(ctx_, cmd, p, &tensor, &view); }},
        {"vkp_kv_cache_record_decode",
         [&](vkp_decode_plan* p) { return vkp_kv_cache_record_decode(cache_, cmd, 0, p, &views, nullptr); }},
    };
    expect_refuses_bad_handles(plan_calls, "plan", "vkp_decode_plan", dead_plan_,
                               reinterpret_cast<vkp_decode_plan*>(manager_));

    const Calls<vkp_attention_plan> attention_plan_calls = {
        {"vkp_attention_plan_info_get",
         [&](vkp_attention_plan* p) { return vkp_attention_plan_info_get(p, &attention_info); }},
        {"vkp_attention_plan_shape_get",
         [&](vkp_attention_plan* p) { return vkp_attention_plan_shape_get(p, &attention_shape); }},
        {"vkp_attention_plan_options_get",
         [&](vkp_attention_plan* p) { return vkp_attention_plan_options_get(p, &attention_options); }},
        {"vkp_attention_plan_describe",
         [&](vkp_attention_plan* p) { return value_failed(std::string(vkp_attention_plan_describe(p)).empty()); }},
        {"vkp_record_attention",
         [&](vkp_attention_plan* p) { return vkp_record_attention(ctx_, cmd, p, &attention_views, nullptr); }},
        {"vkp_kv_cache_record_attention",
         [&](vkp_attention_plan* p) {
           return vkp_kv_cache_record_attention(cache_, cmd, 0, p, &attention_views, nullptr);
         }},
    };
    // A decode plan is not an attention plan.
    expect_refuses_bad_handles(attention_plan_calls, "plan", "vkp_attention_plan", dead_attention_plan_,
                               reinterpret_cast<vkp_attention_plan*>(plan_));

    const Calls<vkp_kv_cache> cache_calls = {
        {"vkp_kv_cache_info_get", [&](vkp_kv_cache* c) { return vkp_kv_cache_info_get(c, &cache_info); }},
        {"vkp_kv_cache_shape_get", [&](vkp_kv_cache* c) { return vkp_kv_cache_shape_get(c, &cache_shape_); }},
        {"vkp_kv_cache_sizing_get", [&](vkp_kv_cache* c) { return vkp_kv_cache_sizing_get(c, &sizing); }},
        {"vkp_kv_cache_layer", [&](vkp_kv_cache* c) { return vkp_kv_cache_layer(c, 0, VKP_FALSE, &layer); }},
        {"vkp_kv_cache_record_copy_blocks",
         [&](vkp_kv_cache* c) { return vkp_kv_cache_record_copy_blocks(c, cmd, &pair, 1); }},
        {"vkp_kv_cache_record_swap_out",
         [&](vkp_kv_cache* c) { return vkp_kv_cache_record_swap_out(c, cmd, &pair, 1); }},
        {"vkp_kv_cache_record_swap_in", [&](vkp_kv_cache* c) { return vkp_kv_cache_record_swap_in(c, cmd, &pair, 1); }},
        {"vkp_kv_cache_record_reshape_and_cache",
         [&](vkp_kv_cache* c) { return vkp_kv_cache_record_reshape_and_cache(c, cmd, 0, &tokens, &rotary, nullptr); }},
        {"vkp_kv_cache_decode_shape",
         [&](vkp_kv_cache* c) { return vkp_kv_cache_decode_shape(c, &shape_, &decode_shape); }},
        {"vkp_kv_cache_attention_shape",
         [&](vkp_kv_cache* c) { return vkp_kv_cache_attention_shape(c, &attention_shape_, &attention_shape); }},
        {"vkp_kv_cache_record_decode",
         [&](vkp_kv_cache* c) { return vkp_kv_cache_record_decode(c, cmd, 0, plan_, &views, nullptr); }},
        {"vkp_kv_cache_record_attention",
         [&](vkp_kv_cache* c) {
           return vkp_kv_cache_record_attention(c, cmd, 0, attention_plan_, &attention_views, nullptr);
         }},
        {"vkp_kv_cache_mla_shape",
         [&](vkp_kv_cache* c) {
           return vkp_kv_cache_mla_shape(c, &attention_shape_, &attention_shape, &u, &mla_form);
         }},
        {"vkp_kv_cache_record_mla_attention",
         [&](vkp_kv_cache* c) { return vkp_kv_cache_record_mla_attention(c, cmd, 0, nullptr, &mla_views, nullptr); }},
    };
    expect_refuses_bad_handles(cache_calls, "cache", "vkp_kv_cache", dead_cache_,
                               reinterpret_cast<vkp_kv_cache*>(read_));

    const Calls<vkp_streaming_read> read_calls = {
        {"vkp_streaming_read_bytes",
         [&](vkp_streaming_read* r) { return value_failed(vkp_streaming_read_bytes(r) == 0); }},
        {"vkp_record_streaming_read", [&](vkp_streaming_read* r) { return vkp_record_streaming_read(ctx_, cmd, r); }},
        {"vkp_measure_streaming_read",
         [&](vkp_streaming_read* r) { return vkp_measure_streaming_read(ctx_, r, 1, &bandwidth); }},
        {"vkp_measure_streaming_read_after",
         [&](vkp_streaming_read* r) { return vkp_measure_streaming_read_after(ctx_, r, read_, 1, &bandwidth); }},
    };
    expect_refuses_bad_handles(read_calls, "read", "vkp_streaming_read", dead_read_,
                               reinterpret_cast<vkp_streaming_read*>(cache_));
    const Calls<vkp_streaming_read> before_calls = {
        {"vkp_measure_streaming_read_after",
         [&](vkp_streaming_read* r) { return vkp_measure_streaming_read_after(ctx_, read_, r, 1, &bandwidth); }},
    };
    expect_refuses_bad_handles(before_calls, "untimed_before", "vkp_streaming_read", dead_read_,
                               reinterpret_cast<vkp_streaming_read*>(ctx_));
  });

  const Calls<vkp_block_manager> manager_calls = {
      {"vkp_block_manager_block_size", [&](vkp_block_manager* m) { return vkp_block_manager_block_size(m, &i); }},
      {"vkp_block_manager_can_allocate",
       [&](vkp_block_manager* m) { return vkp_block_manager_can_allocate(m, prompt, 3, &admission); }},
      {"vkp_block_manager_add_sequence",
       [&](vkp_block_manager* m) { return vkp_block_manager_add_sequence(m, 9, prompt, 3, nullptr); }},
      {"vkp_block_manager_can_append", [&](vkp_block_manager* m) { return vkp_block_manager_can_append(m, 1, &b); }},
      {"vkp_block_manager_append_token",
       [&](vkp_block_manager* m) { return vkp_block_manager_append_token(m, 1, 5, &appended); }},
      {"vkp_block_manager_fork", [&](vkp_block_manager* m) { return vkp_block_manager_fork(m, 1, 2); }},
      {"vkp_block_manager_free_sequence", [&](vkp_block_manager* m) { return vkp_block_manager_free_sequence(m, 1); }},
      {"vkp_block_manager_preempt", [&](vkp_block_manager* m) { return vkp_block_manager_preempt(m, 1, nullptr); }},
      {"vkp_block_manager_can_swap_out",
       [&](vkp_block_manager* m) { return vkp_block_manager_can_swap_out(m, ids, 1, &b); }},
      {"vkp_block_manager_can_swap_in",
       [&](vkp_block_manager* m) { return vkp_block_manager_can_swap_in(m, ids, 1, &admission); }},
      {"vkp_block_manager_swap_out",
       [&](vkp_block_manager* m) { return vkp_block_manager_swap_out(m, ids, 1, &pairs_out, &count); }},
      {"vkp_block_manager_swap_in",
       [&](vkp_block_manager* m) { return vkp_block_manager_swap_in(m, ids, 1, &pairs_out, &count); }},
      {"vkp_block_manager_contains", [&](vkp_block_manager* m) { return vkp_block_manager_contains(m, 1, &b); }},
      {"vkp_block_manager_is_swapped", [&](vkp_block_manager* m) { return vkp_block_manager_is_swapped(m, 1, &b); }},
      {"vkp_block_manager_context_len", [&](vkp_block_manager* m) { return vkp_block_manager_context_len(m, 1, &i); }},
      {"vkp_block_manager_block_table",
       [&](vkp_block_manager* m) { return vkp_block_manager_block_table(m, 1, 0, &table, &count); }},
      {"vkp_block_manager_host_block_table",
       [&](vkp_block_manager* m) { return vkp_block_manager_host_block_table(m, 1, &table, &count); }},
      {"vkp_block_manager_build_batch",
       [&](vkp_block_manager* m) { return vkp_block_manager_build_batch(m, ids, 1, 1, &i, &i); }},
      {"vkp_block_manager_slot_mapping",
       [&](vkp_block_manager* m) { return vkp_block_manager_slot_mapping(m, 1, 0, 1, slots); }},
      {"vkp_block_manager_usage", [&](vkp_block_manager* m) { return vkp_block_manager_usage(m, &usage); }},
      {"vkp_block_manager_prefix_cache_stats",
       [&](vkp_block_manager* m) { return vkp_block_manager_prefix_cache_stats(m, &stats); }},
      {"vkp_block_manager_ref_count",
       [&](vkp_block_manager* m) { return vkp_block_manager_ref_count(m, VKP_FALSE, 0, &i); }},
  };
  expect_refuses_bad_handles(manager_calls, "manager", "vkp_block_manager", dead_manager_,
                             reinterpret_cast<vkp_block_manager*>(buffer_));

  // Destroying NULL is silent; destroying a dead or foreign handle does nothing but say so.
  using Destroy = std::function<void()>;
  const std::vector<std::pair<Destroy, Destroy>> destroys = {
      {[&] { vkp_context_destroy(dead_context_); }, [&] { vkp_context_destroy(reinterpret_cast<vkp_context*>(plan_)); }},
      {[&] { vkp_buffer_destroy(dead_buffer_); }, [&] { vkp_buffer_destroy(reinterpret_cast<vkp_buffer*>(ctx_)); }},
      {[&] { vkp_decode_plan_destroy(dead_plan_); }, [&] { vkp_decode_plan_destroy(reinterpret_cast<vkp_decode_plan*>(buffer_)); }},
      {[&] { vkp_attention_plan_destroy(dead_attention_plan_); },
       [&] { vkp_attention_plan_destroy(reinterpret_cast<vkp_attention_plan*>(plan_)); }},
      {[&] { vkp_block_manager_destroy(dead_manager_); },
       [&] { vkp_block_manager_destroy(reinterpret_cast<vkp_block_manager*>(cache_)); }},
      {[&] { vkp_kv_cache_destroy(dead_cache_); }, [&] { vkp_kv_cache_destroy(reinterpret_cast<vkp_kv_cache*>(manager_)); }},
      {[&] { vkp_streaming_read_destroy(dead_read_); },
       [&] { vkp_streaming_read_destroy(reinterpret_cast<vkp_streaming_read*>(plan_)); }},
  };
  for (const auto& [dead, foreign] : destroys) {
    dead();
    expect_refused(destroy_failed(), "is not a live");
    foreign();
    expect_refused(destroy_failed(), "is not a live");
  }
  vkp_context_destroy(nullptr);
  vkp_buffer_destroy(nullptr);
  vkp_decode_plan_destroy(nullptr);
  vkp_attention_plan_destroy(nullptr);
  vkp_block_manager_destroy(nullptr);
  vkp_kv_cache_destroy(nullptr);
  vkp_streaming_read_destroy(nullptr);
  EXPECT_STREQ(vkp_last_error(), "");
  // The live objects survived all of it.
  EXPECT_EQ(vkp_buffer_size(buffer_), 256u);
  EXPECT_VKP_OK(vkp_block_manager_block_size(manager_, &i));
  EXPECT_VKP_OK(vkp_kv_cache_info_get(cache_, &cache_info));
  EXPECT_EQ(cache_info.num_blocks, 4u);
  EXPECT_VKP_OK(vkp_attention_plan_info_get(attention_plan_, &attention_info));
  EXPECT_EQ(attention_info.max_query_tokens, 2u);
}

// Required pointers other than handles: NULL is refused naming them, on every call that has one.
TEST_F(CApiHostileTest, EveryRequiredPointerRefusesNull) {
  vkp_device_info info;
  vkp_device_info_init(&info);
  vkp_decode_options options;
  vkp_decode_options_init(&options);
  vkp_decode_inputs inputs;
  vkp_decode_inputs_init(&inputs);
  vkp_layer_cache_views layer;
  vkp_layer_cache_views_init(&layer);
  const vkp_tensor_view tensor = whole(DType::f32, 64);
  const vkp_buffer_view view = tensor.memory;
  const vkp_host_tensor none{};
  vkp_host_tensor out_none{};
  uint32_t u = 0;
  int32_t i = 0;
  float f = 0;
  vkp_dtype dtype;
  vkp_bool32 b;
  vkp_admission admission;
  const int32_t prompt[] = {1};
  const uint64_t ids[] = {1};
  const int64_t dims[] = {4};
  vkp_tensor_view tensor_out{};
  vkp_context* made_context = nullptr;
  vkp_decode_plan* made_plan = nullptr;
  vkp_attention_plan* made_attention_plan = nullptr;
  vkp_kv_cache* made_cache = nullptr;
  const vkp_block_copy* pairs_out = nullptr;
  const int32_t* table = nullptr;
  vkp_attention_inputs attention_inputs;
  vkp_attention_inputs_init(&attention_inputs);
  vkp_attention_shape attention_out = attention_shape_;
  vkp_decode_shape decode_out = shape_;
  ASSERT_VKP_OK(vkp_block_manager_add_sequence(manager_, 1, prompt, 1, nullptr));

  const std::vector<std::pair<std::string, std::function<vkp_status()>>> calls = {
      {"name", [&] { return vkp_dtype_parse(nullptr, &dtype); }},
      {"out", [&] { return vkp_dtype_parse("f16", nullptr); }},
      {"count", [&] { return vkp_list_devices(&info, nullptr, nullptr); }},
      {"out", [&] { return vkp_context_create(nullptr, nullptr); }},
      {"out", [&] { return vkp_context_create_external(nullptr, nullptr); }},
      {"external", [&] { return vkp_context_create_external(nullptr, &made_context); }},
      {"out", [&] { return vkp_context_device_info(ctx_, nullptr); }},
      {"out", [&] { return vkp_context_vulkan_handles(ctx_, nullptr); }},
      {"count", [&] { return vkp_context_cooperative_matrix_shapes(ctx_, nullptr, nullptr); }},
      {"out", [&] { return vkp_context_validation_message_count(ctx_, nullptr); }},
      {"record", [&] { return vkp_run_and_wait(ctx_, nullptr, nullptr); }},
      {"elapsed_ns", [&] { return vkp_run_and_time(ctx_, record_nothing, nullptr, nullptr); }},
      {"before", [&] { return vkp_run_and_time_after(ctx_, nullptr, nullptr, record_nothing, nullptr, nullptr); }},
      {"cmd", [&] { return vkp_record_compute_barrier(ctx_, VK_NULL_HANDLE); }},
      {"out", [&] { return vkp_buffer_create(ctx_, 16, VKP_MEMORY_DEVICE, nullptr); }},
      {"out", [&] { return vkp_buffer_tensor(buffer_, VKP_DTYPE_F32, dims, 1, 0, nullptr); }},
      {"shape", [&] { return vkp_buffer_tensor(buffer_, VKP_DTYPE_F32, nullptr, 1, 0, &tensor_out); }},
      {"dst", [&] { return vkp_upload(ctx_, nullptr, &u, 4); }},
      {"src", [&] { return vkp_upload(ctx_, &view, nullptr, 4); }},
      {"src", [&] { return vkp_download(ctx_, nullptr, &u, 4); }},
      {"dst", [&] { return vkp_download(ctx_, &view, nullptr, 4); }},
      {"shape", [&] { return vkp_decode_plan_create(ctx_, nullptr, nullptr, &made_plan); }},
      {"out", [&] { return vkp_decode_plan_create(ctx_, &shape_, nullptr, nullptr); }},
      {"out", [&] { return vkp_decode_plan_info_get(plan_, nullptr); }},
      {"out", [&] { return vkp_decode_plan_shape_get(plan_, nullptr); }},
      {"out", [&] { return vkp_decode_plan_options_get(plan_, nullptr); }},
      {"inputs", [&] { return vkp_decode_shape_of(nullptr, VKP_FALSE, &shape_); }},
      {"inputs", [&] { return vkp_decode_attention(ctx_, nullptr, &options, nullptr, &f, 4, nullptr, 0); }},
      {"inputs", [&] { return vkp_reference_decode_attention(nullptr, nullptr, nullptr, &f, 4, nullptr, 0); }},
      {"shape",
       [&] { return vkp_attention_plan_create(ctx_, nullptr, starts_, 3, nullptr, &made_attention_plan); }},
      {"query_starts",
       [&] { return vkp_attention_plan_create(ctx_, &attention_shape_, nullptr, 3, nullptr, &made_attention_plan); }},
      {"out", [&] { return vkp_attention_plan_create(ctx_, &attention_shape_, starts_, 3, nullptr, nullptr); }},
      {"out", [&] { return vkp_attention_plan_info_get(attention_plan_, nullptr); }},
      {"out", [&] { return vkp_attention_plan_shape_get(attention_plan_, nullptr); }},
      {"out", [&] { return vkp_attention_plan_options_get(attention_plan_, nullptr); }},
      {"inputs", [&] { return vkp_attention_shape_of(nullptr, nullptr, VKP_FALSE, &attention_out); }},
      {"out", [&] { return vkp_attention_shape_of(&attention_inputs, nullptr, VKP_FALSE, nullptr); }},
      {"inputs", [&] { return vkp_batch_attention(ctx_, nullptr, nullptr, nullptr, &f, 4, nullptr, 0); }},
      {"inputs", [&] { return vkp_reference_batch_attention(nullptr, nullptr, &f, 4, nullptr, 0); }},
      {"out", [&] { return vkp_rotary_cos_sin_cache(8, 4, 10000.0, nullptr); }},
      {"positions", [&] { return vkp_rotary_embedding(ctx_, nullptr, nullptr, nullptr, &none, VKP_ROTARY_NEOX); }},
      {"cos_sin_cache",
       [&] { return vkp_reference_rotary_embedding(nullptr, &out_none, &none, nullptr, VKP_ROTARY_NEOX); }},
      {"key",
       [&] {
         return vkp_reference_reshape_and_cache_rotary(nullptr, nullptr, &none, &none, &none, &none, VKP_ROTARY_NEOX,
                                                       &out_none, &out_none, nullptr, VKP_KV_LAYOUT_VLLM);
       }},
      {"value_cache",
       [&] {
         return vkp_reference_reshape_and_cache_rotary(nullptr, &out_none, &none, &none, &none, &none, VKP_ROTARY_GPTJ,
                                                       &out_none, nullptr, nullptr, VKP_KV_LAYOUT_HND);
       }},
      {"batch", [&] { return vkp_kv_cache_decode_shape(cache_, nullptr, &decode_out); }},
      {"out", [&] { return vkp_kv_cache_decode_shape(cache_, &shape_, nullptr); }},
      {"batch", [&] { return vkp_kv_cache_attention_shape(cache_, nullptr, &attention_out); }},
      {"out", [&] { return vkp_kv_cache_attention_shape(cache_, &attention_shape_, nullptr); }},
      {"scale", [&] { return vkp_fp8_scale_from_amax(1.0f, VKP_DTYPE_FP8_E4M3, nullptr); }},
      {"out", [&] { return vkp_measure_read_bandwidth(ctx_, 1024, 1, nullptr); }},
      {"out", [&] { return vkp_streaming_read_create(ctx_, 1024, nullptr); }},
      {"out", [&] { return vkp_measure_streaming_read(ctx_, read_, 1, nullptr); }},
      {"a.output", [&] { return vkp_merge_attention(ctx_, nullptr, &none, &none, &none, &out_none, nullptr); }},
      {"b.lse", [&] { return vkp_reference_merge_attention(&none, &none, &none, nullptr, &out_none, nullptr); }},
      {"key",
       [&] {
         return vkp_reference_reshape_and_cache(nullptr, &none, &none, &out_none, &out_none, nullptr, VKP_KV_LAYOUT_VLLM);
       }},
      {"value_cache", [&] { return vkp_reference_copy_blocks(&out_none, nullptr, nullptr, 0, VKP_KV_LAYOUT_NHD); }},
      {"dst_key_cache",
       [&] { return vkp_reference_swap_blocks(&none, &none, nullptr, &out_none, nullptr, 0, VKP_KV_LAYOUT_VLLM); }},
      {"seq_starts",
       [&] {
         return vkp_reference_gather(&none, &none, &none, nullptr, nullptr, VKP_KV_LAYOUT_VLLM, &out_none, &out_none);
       }},
      {"out", [&] { return vkp_reference_absmax(&none, nullptr); }},
      {"shape", [&] { return vkp_kv_cache_sizing_of(nullptr, 4, nullptr); }},
      {"out", [&] { return vkp_kv_cache_blocks_for_budget(&cache_shape_, 1 << 20, nullptr); }},
      {"out", [&] { return vkp_kv_cache_max_blocks_per_pool(&cache_shape_, 1 << 20, nullptr); }},
      {"device", [&] { return vkp_kv_cache_plan(nullptr, &cache_shape_, &cache_options_, nullptr); }},
      {"options", [&] { return vkp_kv_cache_create(ctx_, &cache_shape_, nullptr, &made_cache); }},
      {"out", [&] { return vkp_kv_cache_layer(cache_, 0, VKP_FALSE, nullptr); }},
      {"out", [&] { return vkp_block_manager_create(8, 16, nullptr, nullptr); }},
      {"prompt", [&] { return vkp_block_manager_can_allocate(manager_, nullptr, 2, &admission); }},
      {"out", [&] { return vkp_block_manager_can_allocate(manager_, prompt, 1, nullptr); }},
      {"out", [&] { return vkp_block_manager_can_append(manager_, 1, nullptr); }},
      {"out", [&] { return vkp_block_manager_append_token(manager_, 1, 2, nullptr); }},
      {"seq_ids", [&] { return vkp_block_manager_can_swap_out(manager_, nullptr, 1, &b); }},
      {"out", [&] { return vkp_block_manager_can_swap_in(manager_, ids, 1, nullptr); }},
      {"pairs", [&] { return vkp_block_manager_swap_out(manager_, ids, 1, nullptr, nullptr); }},
      {"num_pairs", [&] { return vkp_block_manager_swap_in(manager_, ids, 1, &pairs_out, nullptr); }},
      {"out", [&] { return vkp_block_manager_contains(manager_, 1, nullptr); }},
      {"out", [&] { return vkp_block_manager_is_swapped(manager_, 1, nullptr); }},
      {"out", [&] { return vkp_block_manager_context_len(manager_, 1, nullptr); }},
      {"table", [&] { return vkp_block_manager_block_table(manager_, 1, 0, nullptr, nullptr); }},
      {"count", [&] { return vkp_block_manager_host_block_table(manager_, 1, &table, nullptr); }},
      {"context_lens", [&] { return vkp_block_manager_build_batch(manager_, ids, 1, 1, &i, nullptr); }},
      {"block_tables", [&] { return vkp_block_manager_build_batch(manager_, ids, 1, 1, nullptr, &i); }},
      {"slots", [&] { return vkp_block_manager_slot_mapping(manager_, 1, 0, 1, nullptr); }},
      {"out", [&] { return vkp_block_manager_usage(manager_, nullptr); }},
      {"out", [&] { return vkp_block_manager_prefix_cache_stats(manager_, nullptr); }},
      {"out", [&] { return vkp_block_manager_ref_count(manager_, VKP_FALSE, 0, nullptr); }},
  };
  for (const auto& [name, call] : calls) {
    SCOPED_TRACE(name);
    expect_refused(call(), name + " is NULL");
  }
  EXPECT_EQ(made_context, nullptr);
  EXPECT_EQ(made_plan, nullptr);
  EXPECT_EQ(made_attention_plan, nullptr);
  EXPECT_EQ(made_cache, nullptr);
  vkp_reshape_and_cache_views reshape;
  vkp_reshape_and_cache_views_init(&reshape);
  vkp_rotary_inputs rotary;
  vkp_rotary_inputs_init(&rotary);
  vkp_rotary_views rotary_views;
  vkp_rotary_views_init(&rotary_views);
  vkp_attention_views attention_views;
  vkp_attention_views_init(&attention_views);
  with_cmd([&](VkCommandBuffer cmd) {
    expect_refused(vkp_record_decode(ctx_, cmd, plan_, nullptr, nullptr), "views is NULL");
    expect_refused(vkp_record_attention(ctx_, cmd, attention_plan_, nullptr, nullptr), "views is NULL");
    expect_refused(vkp_record_attention(ctx_, VK_NULL_HANDLE, attention_plan_, &attention_views, nullptr),
                   "cmd is NULL");
    expect_refused(vkp_record_rotary_embedding(ctx_, cmd, nullptr), "views is NULL");
    expect_refused(vkp_record_rotary_embedding(ctx_, VK_NULL_HANDLE, &rotary_views), "cmd is NULL");
    expect_refused(vkp_record_reshape_and_cache_rotary(ctx_, cmd, nullptr, &rotary, nullptr), "views is NULL");
    expect_refused(vkp_record_reshape_and_cache_rotary(ctx_, cmd, &reshape, nullptr, nullptr), "rotary is NULL");
    expect_refused(vkp_record_streaming_read_of(ctx_, cmd, nullptr, &view), "data is NULL");
    expect_refused(vkp_record_streaming_read_of(ctx_, cmd, &view, nullptr), "sink is NULL");
    expect_refused(vkp_record_streaming_read_of(ctx_, VK_NULL_HANDLE, &view, &view), "cmd is NULL");
    expect_refused(vkp_kv_cache_record_reshape_and_cache(cache_, cmd, 0, nullptr, nullptr, nullptr), "tokens is NULL");
    expect_refused(vkp_kv_cache_record_reshape_and_cache(cache_, VK_NULL_HANDLE, 0, nullptr, nullptr, nullptr),
                   "cmd is NULL");
    vkp_decode_views decode_views;
    vkp_decode_views_init(&decode_views);
    expect_refused(vkp_kv_cache_record_decode(cache_, cmd, 0, plan_, nullptr, nullptr),
                   "vkp_kv_cache_record_decode: views is NULL");
    expect_refused(vkp_kv_cache_record_decode(cache_, VK_NULL_HANDLE, 0, plan_, &decode_views, nullptr),
                   "vkp_kv_cache_record_decode: cmd is NULL");
    expect_refused(vkp_kv_cache_record_attention(cache_, cmd, 0, attention_plan_, nullptr, nullptr),
                   "vkp_kv_cache_record_attention: views is NULL");
    expect_refused(vkp_kv_cache_record_attention(cache_, VK_NULL_HANDLE, 0, attention_plan_, &attention_views, nullptr),
                   "vkp_kv_cache_record_attention: cmd is NULL");
    expect_refused(vkp_record_decode_order(ctx_, cmd, plan_, nullptr, &view), "context_lens is NULL");
    expect_refused(vkp_record_reshape_and_cache(ctx_, cmd, nullptr, nullptr), "views is NULL");
    expect_refused(vkp_record_copy_blocks(ctx_, cmd, nullptr, 1, nullptr, 0), "layers is NULL");
    expect_refused(vkp_record_swap_blocks(ctx_, cmd, &layer, 1, nullptr, 1, nullptr, 0), "dst is NULL");
    expect_refused(vkp_record_gather(ctx_, cmd, nullptr, nullptr), "views is NULL");
    expect_refused(vkp_record_absmax(ctx_, cmd, &tensor, nullptr), "amax_out is NULL");
    expect_refused(vkp_record_fill_random(ctx_, cmd, nullptr, 0), "view is NULL");
    expect_refused(vkp_record_merge_attention(ctx_, cmd, nullptr), "views is NULL");
    expect_refused(vkp_record_streaming_read(ctx_, cmd, nullptr), "read is NULL");
    expect_refused(vkp_kv_cache_record_swap_in(cache_, cmd, nullptr, 2), "pairs is NULL");
    expect_refused(vkp_kv_cache_record_copy_blocks(cache_, cmd, nullptr, 1), "pairs is NULL");
  });
  expect_refused(vkp_decode_attention(ctx_, &inputs, &options, nullptr, nullptr, 4, nullptr, 0), "query: shape []");
}

// Every extensible struct argument, given a struct_size no release had (the struct of a newer
// header, or one never initialised), is refused naming the argument, the struct and the size;
// an output is then left as it was.
TEST_F(CApiHostileTest, EveryStructArgumentRefusesSizesNoReleaseHad) {
  // A copy of `value` with another struct_size, passed as a pointer for the call's duration.
  auto bad = [](auto value, uint32_t size) {
    value.struct_size = size;
    return WithSize<decltype(value)>{value};
  };
  const auto check = [&](vkp_status status, const std::string& arg, const std::string& type, uint32_t size) {
    expect_refused(status, arg + ": " + type + ".struct_size: " + std::to_string(size) + " is not a size");
  };
  vkp_context_options context_options;
  vkp_context_options_init(&context_options);
  vkp_external_device external;
  vkp_external_device_init(&external);
  vkp_device_info info;
  vkp_device_info_init(&info);
  vkp_decode_options options;
  vkp_decode_options_init(&options);
  vkp_decode_inputs inputs;
  vkp_decode_inputs_init(&inputs);
  vkp_cache_scales scales;
  vkp_cache_scales_init(&scales);
  vkp_kv_cache_sizing sizing;
  vkp_kv_cache_sizing_init(&sizing);
  vkp_block_manager_options manager_options;
  vkp_block_manager_options_init(&manager_options);
  const vkp_host_tensor none{};
  vkp_host_tensor out_none{};
  float f[4] = {};
  uint32_t blocks = 0;
  vkp_context* made_context = nullptr;
  vkp_decode_plan* made_plan = nullptr;
  vkp_kv_cache* made_cache = nullptr;
  vkp_block_manager* made_manager = nullptr;
  const uint32_t newer = 4096, never = 0;

  for (uint32_t size : {newer, never}) {
    SCOPED_TRACE(size);
    uint32_t count = 1;
    auto infos = info;
    infos.struct_size = size;
    check(vkp_list_devices(&infos, &count, nullptr), "infos[0]", "vkp_device_info", size);
    EXPECT_EQ(count, 1u);
    check(vkp_context_create(bad(context_options, size), &made_context), "options", "vkp_context_options", size);
    check(vkp_context_create_external(bad(external, size), &made_context), "external", "vkp_external_device", size);
    vkp_device_info out_info;
    std::memset(&out_info, 0, sizeof(out_info));
    out_info.struct_size = size;
    check(vkp_context_device_info(ctx_, &out_info), "out", "vkp_device_info", size);
    EXPECT_EQ(out_info.name[0], '\0') << "a refused call wrote its output";
    vkp_vulkan_handles handles;
    vkp_vulkan_handles_init(&handles);
    check(vkp_context_vulkan_handles(ctx_, bad(handles, size)), "out", "vkp_vulkan_handles", size);
    check(vkp_decode_plan_create(ctx_, bad(shape_, size), nullptr, &made_plan), "shape", "vkp_decode_shape", size);
    check(vkp_decode_plan_create(ctx_, &shape_, bad(options, size), &made_plan), "options", "vkp_decode_options",
          size);
    vkp_decode_plan_info plan_info;
    vkp_decode_plan_info_init(&plan_info);
    check(vkp_decode_plan_info_get(plan_, bad(plan_info, size)), "out", "vkp_decode_plan_info", size);
    check(vkp_decode_plan_shape_get(plan_, bad(shape_, size)), "out", "vkp_decode_shape", size);
    check(vkp_decode_plan_options_get(plan_, bad(options, size)), "out", "vkp_decode_options", size);
    check(vkp_decode_shape_of(bad(inputs, size), VKP_FALSE, &shape_), "inputs", "vkp_decode_inputs", size);
    check(vkp_decode_attention(ctx_, bad(inputs, size), nullptr, nullptr, f, sizeof(f), nullptr, 0), "inputs",
          "vkp_decode_inputs", size);
    check(vkp_reference_decode_attention(&inputs, bad(options, size), nullptr, f, sizeof(f), nullptr, 0), "options",
          "vkp_decode_options", size);
    vkp_decode_params params;
    vkp_decode_params_init(&params);
    check(vkp_decode_attention(ctx_, &inputs, nullptr, bad(params, size), f, sizeof(f), nullptr, 0), "params",
          "vkp_decode_params", size);
    check(vkp_reference_decode_attention(&inputs, nullptr, bad(params, size), f, sizeof(f), nullptr, 0), "params",
          "vkp_decode_params", size);
    vkp_cooperative_matrix_shape matrix_shapes[2];
    vkp_cooperative_matrix_shape_init(&matrix_shapes[0]);
    vkp_cooperative_matrix_shape_init(&matrix_shapes[1]);
    matrix_shapes[0].struct_size = size;
    uint32_t shape_count = 2;
    check(vkp_context_cooperative_matrix_shapes(ctx_, &shape_count, matrix_shapes), "shapes[0]",
          "vkp_cooperative_matrix_shape", size);
    EXPECT_EQ(shape_count, 2u) << "a refused call wrote the count";

    // Multi-query attention.
    vkp_attention_plan* made_attention_plan = nullptr;
    check(vkp_attention_plan_create(ctx_, bad(attention_shape_, size), starts_, 3, nullptr, &made_attention_plan),
          "shape", "vkp_attention_shape", size);
    vkp_attention_options attention_options;
    vkp_attention_options_init(&attention_options);
    check(vkp_attention_plan_create(ctx_, &attention_shape_, starts_, 3, bad(attention_options, size),
                                    &made_attention_plan),
          "options", "vkp_attention_options", size);
    EXPECT_EQ(made_attention_plan, nullptr);
    vkp_attention_plan_info attention_info;
    vkp_attention_plan_info_init(&attention_info);
    check(vkp_attention_plan_info_get(attention_plan_, bad(attention_info, size)), "out", "vkp_attention_plan_info",
          size);
    check(vkp_attention_plan_shape_get(attention_plan_, bad(attention_shape_, size)), "out", "vkp_attention_shape",
          size);
    check(vkp_attention_plan_options_get(attention_plan_, bad(attention_options, size)), "out",
          "vkp_attention_options", size);
    vkp_attention_inputs attention_inputs;
    vkp_attention_inputs_init(&attention_inputs);
    vkp_attention_shape attention_out = attention_shape_;
    check(vkp_attention_shape_of(bad(attention_inputs, size), nullptr, VKP_FALSE, &attention_out), "inputs",
          "vkp_attention_inputs", size);
    check(vkp_attention_shape_of(&attention_inputs, bad(params, size), VKP_FALSE, &attention_out), "params",
          "vkp_decode_params", size);
    check(vkp_batch_attention(ctx_, bad(attention_inputs, size), nullptr, nullptr, f, sizeof(f), nullptr, 0), "inputs",
          "vkp_attention_inputs", size);
    check(vkp_batch_attention(ctx_, &attention_inputs, bad(attention_options, size), nullptr, f, sizeof(f), nullptr, 0),
          "options", "vkp_attention_options", size);
    check(vkp_reference_batch_attention(&attention_inputs, bad(params, size), f, sizeof(f), nullptr, 0), "params",
          "vkp_decode_params", size);
    vkp_decode_shape decode_out = shape_;
    check(vkp_kv_cache_decode_shape(cache_, bad(shape_, size), &decode_out), "batch", "vkp_decode_shape", size);
    check(vkp_kv_cache_decode_shape(cache_, &shape_, bad(decode_out, size)), "out", "vkp_decode_shape", size);
    check(vkp_kv_cache_attention_shape(cache_, bad(attention_shape_, size), &attention_out), "batch",
          "vkp_attention_shape", size);
    vkp_attention_shape attention_sized = attention_shape_;
    attention_sized.struct_size = size;
    check(vkp_kv_cache_attention_shape(cache_, &attention_shape_, &attention_sized), "out", "vkp_attention_shape",
          size);
    EXPECT_EQ(attention_sized.num_kv_heads, attention_shape_.num_kv_heads) << "a refused call wrote its output";
    uint32_t value_head_size = 0;
    vkp_mla_cache_form cache_form = VKP_MLA_ONE_POOL;
    check(vkp_kv_cache_mla_shape(cache_, bad(attention_shape_, size), &attention_out, &value_head_size, &cache_form),
          "batch", "vkp_attention_shape", size);
    check(vkp_kv_cache_mla_shape(cache_, &attention_shape_, &attention_sized, &value_head_size, &cache_form), "out",
          "vkp_attention_shape", size);
    EXPECT_EQ(value_head_size, 0u) << "a refused call wrote its output";
    with_cmd([&](VkCommandBuffer cmd) {
      vkp_decode_views views;
      vkp_decode_views_init(&views);
      check(vkp_record_decode(ctx_, cmd, plan_, bad(views, size), nullptr), "views", "vkp_decode_views", size);
      check(vkp_record_decode(ctx_, cmd, plan_, &views, bad(params, size)), "params", "vkp_decode_params", size);
      vkp_attention_views attention_views;
      vkp_attention_views_init(&attention_views);
      check(vkp_record_attention(ctx_, cmd, attention_plan_, bad(attention_views, size), nullptr), "views",
            "vkp_attention_views", size);
      check(vkp_record_attention(ctx_, cmd, attention_plan_, &attention_views, bad(params, size)), "params",
            "vkp_decode_params", size);
      check(vkp_kv_cache_record_decode(cache_, cmd, 0, plan_, bad(views, size), nullptr), "views", "vkp_decode_views",
            size);
      check(vkp_kv_cache_record_decode(cache_, cmd, 0, plan_, &views, bad(params, size)), "params",
            "vkp_decode_params", size);
      check(vkp_kv_cache_record_attention(cache_, cmd, 0, attention_plan_, bad(attention_views, size), nullptr),
            "views", "vkp_attention_views", size);
      check(vkp_kv_cache_record_attention(cache_, cmd, 0, attention_plan_, &attention_views, bad(params, size)),
            "params", "vkp_decode_params", size);
      vkp_rotary_views rotary_views;
      vkp_rotary_views_init(&rotary_views);
      check(vkp_record_rotary_embedding(ctx_, cmd, bad(rotary_views, size)), "views", "vkp_rotary_views", size);
      vkp_reshape_and_cache_views rotary_cache;
      vkp_reshape_and_cache_views_init(&rotary_cache);
      vkp_rotary_inputs rotary;
      vkp_rotary_inputs_init(&rotary);
      check(vkp_record_reshape_and_cache_rotary(ctx_, cmd, bad(rotary_cache, size), &rotary, nullptr), "views",
            "vkp_reshape_and_cache_views", size);
      check(vkp_record_reshape_and_cache_rotary(ctx_, cmd, &rotary_cache, bad(rotary, size), nullptr), "rotary",
            "vkp_rotary_inputs", size);
      check(vkp_record_reshape_and_cache_rotary(ctx_, cmd, &rotary_cache, &rotary, bad(scales, size)), "scales",
            "vkp_cache_scales", size);
      vkp_new_tokens tokens;
      vkp_new_tokens_init(&tokens);
      check(vkp_kv_cache_record_reshape_and_cache(cache_, cmd, 0, bad(tokens, size), nullptr, nullptr), "tokens",
            "vkp_new_tokens", size);
      check(vkp_kv_cache_record_reshape_and_cache(cache_, cmd, 0, &tokens, bad(rotary, size), nullptr), "rotary",
            "vkp_rotary_inputs", size);
      check(vkp_kv_cache_record_reshape_and_cache(cache_, cmd, 0, &tokens, nullptr, bad(scales, size)), "scales",
            "vkp_cache_scales", size);
      vkp_reshape_and_cache_views reshape;
      vkp_reshape_and_cache_views_init(&reshape);
      check(vkp_record_reshape_and_cache(ctx_, cmd, bad(reshape, size), nullptr), "views",
            "vkp_reshape_and_cache_views", size);
      check(vkp_record_reshape_and_cache(ctx_, cmd, &reshape, bad(scales, size)), "scales", "vkp_cache_scales", size);
      vkp_layer_cache_views layers[2];
      vkp_layer_cache_views_init(&layers[0]);
      vkp_layer_cache_views_init(&layers[1]);
      const vkp_block_copy pair{0, 1};
      vkp_layer_cache_views first_bad[2] = {layers[0], layers[1]};
      first_bad[0].struct_size = size;
      check(vkp_record_copy_blocks(ctx_, cmd, first_bad, 2, &pair, 1), "layers[0]", "vkp_layer_cache_views", size);
      // One array, one struct size: a second element that differs from the first is refused.
      vkp_layer_cache_views second_bad[2] = {layers[0], layers[1]};
      second_bad[1].struct_size = size;
      expect_refused(vkp_record_copy_blocks(ctx_, cmd, second_bad, 2, &pair, 1), "layers[1]: vkp_layer_cache_views");
      check(vkp_record_swap_blocks(ctx_, cmd, layers, 1, first_bad, 1, &pair, 1), "dst[0]", "vkp_layer_cache_views",
            size);
      vkp_gather_views gather;
      vkp_gather_views_init(&gather);
      check(vkp_record_gather(ctx_, cmd, bad(gather, size), nullptr), "views", "vkp_gather_views", size);
      vkp_merge_views merge;
      vkp_merge_views_init(&merge);
      check(vkp_record_merge_attention(ctx_, cmd, bad(merge, size)), "views", "vkp_merge_views", size);
    });
    vkp_bandwidth bandwidth;
    vkp_bandwidth_init(&bandwidth);
    check(vkp_measure_read_bandwidth(ctx_, 1024, 1, bad(bandwidth, size)), "out", "vkp_bandwidth", size);
    check(vkp_measure_streaming_read(ctx_, read_, 1, bad(bandwidth, size)), "out", "vkp_bandwidth", size);
    check(vkp_reference_reshape_and_cache(&none, &none, &none, &out_none, &out_none, bad(scales, size),
                                          VKP_KV_LAYOUT_VLLM),
          "scales", "vkp_cache_scales", size);
    check(vkp_reference_reshape_and_cache_rotary(nullptr, &out_none, &none, &none, &none, &none, VKP_ROTARY_NEOX,
                                                 &out_none, &out_none, bad(scales, size), VKP_KV_LAYOUT_VLLM),
          "scales", "vkp_cache_scales", size);
    check(vkp_kv_cache_sizing_of(bad(cache_shape_, size), 4, &sizing), "shape", "vkp_kv_cache_shape", size);
    check(vkp_kv_cache_sizing_of(&cache_shape_, 4, bad(sizing, size)), "out", "vkp_kv_cache_sizing", size);
    check(vkp_kv_cache_blocks_for_budget(bad(cache_shape_, size), 1 << 20, &blocks), "shape", "vkp_kv_cache_shape",
          size);
    check(vkp_kv_cache_max_blocks_per_pool(bad(cache_shape_, size), 1 << 20, &blocks), "shape",
          "vkp_kv_cache_shape", size);
    ASSERT_VKP_OK(vkp_context_device_info(ctx_, &info));
    check(vkp_kv_cache_plan(bad(info, size), &cache_shape_, &cache_options_, &sizing), "device", "vkp_device_info",
          size);
    check(vkp_kv_cache_plan(&info, &cache_shape_, bad(cache_options_, size), &sizing), "options",
          "vkp_kv_cache_options", size);
    check(vkp_kv_cache_create(ctx_, &cache_shape_, bad(cache_options_, size), &made_cache), "options",
          "vkp_kv_cache_options", size);
    vkp_kv_cache_info cache_info;
    vkp_kv_cache_info_init(&cache_info);
    check(vkp_kv_cache_info_get(cache_, bad(cache_info, size)), "out", "vkp_kv_cache_info", size);
    check(vkp_kv_cache_shape_get(cache_, bad(cache_shape_, size)), "out", "vkp_kv_cache_shape", size);
    check(vkp_kv_cache_sizing_get(cache_, bad(sizing, size)), "out", "vkp_kv_cache_sizing", size);
    vkp_layer_cache_views layer;
    vkp_layer_cache_views_init(&layer);
    check(vkp_kv_cache_layer(cache_, 0, VKP_FALSE, bad(layer, size)), "out", "vkp_layer_cache_views", size);
    check(vkp_block_manager_create(8, 16, bad(manager_options, size), &made_manager), "options",
          "vkp_block_manager_options", size);
    const int32_t prompt[] = {1};
    ASSERT_VKP_OK(vkp_block_manager_add_sequence(manager_, 7, prompt, 1, nullptr));
    vkp_append_result appended;
    vkp_append_result_init(&appended);
    check(vkp_block_manager_append_token(manager_, 7, 3, bad(appended, size)), "out", "vkp_append_result", size);
    int32_t len = 0;
    ASSERT_VKP_OK(vkp_block_manager_context_len(manager_, 7, &len));
    EXPECT_EQ(len, 1) << "a refused append_token appended";
    ASSERT_VKP_OK(vkp_block_manager_free_sequence(manager_, 7));
    vkp_block_usage usage;
    vkp_block_usage_init(&usage);
    check(vkp_block_manager_usage(manager_, bad(usage, size)), "out", "vkp_block_usage", size);
    vkp_prefix_cache_stats stats;
    vkp_prefix_cache_stats_init(&stats);
    check(vkp_block_manager_prefix_cache_stats(manager_, bad(stats, size)), "out", "vkp_prefix_cache_stats", size);
  }
  EXPECT_EQ(made_context, nullptr);
  EXPECT_EQ(made_plan, nullptr);
  EXPECT_EQ(made_cache, nullptr);
  EXPECT_EQ(made_manager, nullptr);
}

// Enums outside their lists and booleans other than 0 and 1 are refused naming the field and
// the value, wherever they appear.
TEST_F(CApiHostileTest, EnumsAndBooleansOutsideTheirValuesAreRefused) {
  const vkp_dtype bad_dtypes[] = {vkp_dtype(9), vkp_dtype(-1), VKP_DTYPE_MAX_ENUM};
  for (vkp_dtype dtype : bad_dtypes) {
    const std::string value = std::to_string(int64_t(dtype));
    SCOPED_TRACE(value);
    EXPECT_EQ(vkp_dtype_size(dtype), 0u);
    expect_refused(VKP_ERROR_INVALID_ARGUMENT, "vkp_dtype_size: dtype: " + value + " is not a vkp_dtype");
    EXPECT_STREQ(vkp_dtype_name(dtype), "unknown");
    expect_refused(VKP_ERROR_INVALID_ARGUMENT, "vkp_dtype_name: dtype: " + value);
    EXPECT_EQ(vkp_dtype_max(dtype), 0.0f);
    expect_refused(VKP_ERROR_INVALID_ARGUMENT, "vkp_dtype_max: dtype: " + value);
    float scale = 0;
    expect_refused(vkp_fp8_scale_from_amax(1.0f, dtype, &scale), "fp8_format: " + value);
    vkp_tensor_view t{};
    const int64_t dims[] = {4};
    expect_refused(vkp_buffer_tensor(buffer_, dtype, dims, 1, 0, &t), "dtype: " + value);
    vkp_decode_shape shape = shape_;
    shape.query_dtype = dtype;
    vkp_decode_plan* plan = nullptr;
    expect_refused(vkp_decode_plan_create(ctx_, &shape, nullptr, &plan), "shape.query_dtype: " + value);
    shape = shape_;
    shape.cache_dtype = dtype;
    expect_refused(vkp_decode_plan_create(ctx_, &shape, nullptr, &plan), "shape.cache_dtype: " + value);
    vkp_attention_shape attention = attention_shape_;
    attention.query_dtype = dtype;
    vkp_attention_plan* attention_plan = nullptr;
    expect_refused(vkp_attention_plan_create(ctx_, &attention, starts_, 3, nullptr, &attention_plan),
                   "shape.query_dtype: " + value);
    vkp_attention_shape attention_out = attention_shape_;
    expect_refused(vkp_kv_cache_attention_shape(cache_, &attention, &attention_out), "batch.query_dtype: " + value);
    vkp_host_tensor cos_sin{nullptr, dtype, 2, {8, 4}};
    expect_refused(vkp_rotary_cos_sin_cache(8, 4, 10000.0, &cos_sin), "out.dtype: " + value);
    vkp_kv_cache_shape cache_shape = cache_shape_;
    cache_shape.dtype = dtype;
    uint32_t blocks = 0;
    expect_refused(vkp_kv_cache_blocks_for_budget(&cache_shape, 1 << 20, &blocks), "shape.dtype: " + value);
    vkp_decode_inputs inputs;
    vkp_decode_inputs_init(&inputs);
    inputs.cache_dtype = dtype;
    vkp_decode_shape out = shape_;
    expect_refused(vkp_decode_shape_of(&inputs, VKP_FALSE, &out), "inputs.cache_dtype: " + value);
    float data[4] = {};
    vkp_host_tensor x{data, dtype, 1, {4}};
    float amax = 0;
    expect_refused(vkp_reference_absmax(&x, &amax), "x: " + value);
    vkp_tensor_view view = whole(DType::f32, 16);
    view.dtype = dtype;
    with_cmd([&](VkCommandBuffer cmd) {
      expect_refused(vkp_record_fill_random(ctx_, cmd, &view, 1), "view: " + value);
    });
  }
  vkp_buffer* made = nullptr;
  expect_refused(vkp_buffer_create(ctx_, 16, vkp_memory_kind(2), &made), "kind: 2 is not a vkp_memory_kind");
  expect_refused(vkp_buffer_create(ctx_, 16, VKP_MEMORY_KIND_MAX_ENUM, &made), "kind: 2147483647");
  EXPECT_EQ(made, nullptr);
  EXPECT_STREQ(vkp_status_name(VKP_STATUS_MAX_ENUM), "unknown");
  EXPECT_STREQ(vkp_status_name(vkp_status(-3)), "unknown");

  vkp_decode_plan* plan = nullptr;
  auto refused_options = [&](auto change, const std::string& message) {
    vkp_decode_options o;
    vkp_decode_options_init(&o);
    change(o);
    expect_refused(vkp_decode_plan_create(ctx_, &shape_, &o, &plan), message);
    EXPECT_EQ(plan, nullptr);
  };
  refused_options([](vkp_decode_options& o) { o.split = VKP_SPLIT_MODE_MAX_ENUM; }, "options.split: 2147483647 is not a vkp_split_mode");
  refused_options([](vkp_decode_options& o) { o.split = vkp_split_mode(-1); }, "options.split: 4294967295");
  refused_options([](vkp_decode_options& o) { o.kernel = VKP_DECODE_KERNEL_MAX_ENUM; }, "options.kernel: 2147483647");
  refused_options([](vkp_decode_options& o) { o.order = vkp_decode_order(3); }, "options.order: 3");
  refused_options([](vkp_decode_options& o) { o.merge = VKP_DECODE_MERGE_MAX_ENUM; }, "options.merge: 2147483647");
  vkp_decode_params params;
  vkp_decode_params_init(&params);
  params.has_scale = 2;
  with_cmd([&](VkCommandBuffer cmd) {
    vkp_decode_views views;
    vkp_decode_views_init(&views);
    expect_refused(vkp_record_decode(ctx_, cmd, plan_, &views, &params), "params.has_scale: 2 is not 0 or 1");
    vkp_attention_views attention_views;
    vkp_attention_views_init(&attention_views);
    expect_refused(vkp_record_attention(ctx_, cmd, attention_plan_, &attention_views, &params),
                   "params.has_scale: 2 is not 0 or 1");
    expect_refused(vkp_kv_cache_record_decode(cache_, cmd, 0, plan_, &views, &params),
                   "vkp_kv_cache_record_decode: params.has_scale: 2 is not 0 or 1");
    expect_refused(vkp_kv_cache_record_attention(cache_, cmd, 0, attention_plan_, &attention_views, &params),
                   "vkp_kv_cache_record_attention: params.has_scale: 2 is not 0 or 1");
  });

  for (const char* field : {"alibi", "softcap", "sinks", "lse"}) {
    vkp_decode_shape shape = shape_;
    if (std::string(field) == "alibi") shape.alibi = 7;
    if (std::string(field) == "softcap") shape.softcap = 2;
    if (std::string(field) == "sinks") shape.sinks = 7;
    if (std::string(field) == "lse") shape.lse = 0xFFFFFFFFu;
    expect_refused(vkp_decode_plan_create(ctx_, &shape, nullptr, &plan), std::string("shape.") + field + ": ");
    vkp_decode_shape out = shape_;
    expect_refused(vkp_kv_cache_decode_shape(cache_, &shape, &out), std::string("batch.") + field + ": ");
  }

  // Cache layouts, wherever one is given.
  for (vkp_kv_layout layout : {vkp_kv_layout(3), vkp_kv_layout(-1), VKP_KV_LAYOUT_MAX_ENUM}) {
    const std::string value = std::to_string(uint32_t(layout)) + " is not a vkp_kv_layout";
    SCOPED_TRACE(value);
    vkp_decode_shape shape = shape_;
    shape.kv_layout = layout;
    expect_refused(vkp_decode_plan_create(ctx_, &shape, nullptr, &plan), "shape.kv_layout: " + value);
    vkp_attention_shape attention = attention_shape_;
    attention.kv_layout = layout;
    vkp_attention_plan* attention_plan = nullptr;
    expect_refused(vkp_attention_plan_create(ctx_, &attention, starts_, 3, nullptr, &attention_plan),
                   "shape.kv_layout: " + value);
    EXPECT_EQ(attention_plan, nullptr);
    // The cache's helpers check the batch's enums, the layout too, although the cache's replaces it.
    vkp_attention_shape attention_out = attention_shape_;
    expect_refused(vkp_kv_cache_attention_shape(cache_, &attention, &attention_out), "batch.kv_layout: " + value);
    vkp_decode_shape decode_out = shape_;
    expect_refused(vkp_kv_cache_decode_shape(cache_, &shape, &decode_out), "batch.kv_layout: " + value);
    vkp_attention_inputs attention_inputs;
    vkp_attention_inputs_init(&attention_inputs);
    attention_inputs.kv_layout = layout;
    expect_refused(vkp_attention_shape_of(&attention_inputs, nullptr, VKP_FALSE, &attention),
                   "inputs.kv_layout: " + value);
    vkp_kv_cache_shape cache_shape = cache_shape_;
    cache_shape.layout = layout;
    uint32_t blocks = 0;
    expect_refused(vkp_kv_cache_blocks_for_budget(&cache_shape, 1 << 20, &blocks), "shape.layout: " + value);
    const vkp_host_tensor none{};
    vkp_host_tensor out_none{};
    expect_refused(vkp_reference_reshape_and_cache(&none, &none, &none, &out_none, &out_none, nullptr, layout),
                   "layout: " + value);
    expect_refused(vkp_reference_copy_blocks(&out_none, &out_none, nullptr, 0, layout), "layout: " + value);
    expect_refused(vkp_reference_swap_blocks(&none, &none, &out_none, &out_none, nullptr, 0, layout),
                   "layout: " + value);
    out_none.dtype = VKP_DTYPE_F32;
    expect_refused(vkp_reference_gather(&none, &none, &none, &none, nullptr, layout, &out_none, &out_none),
                   "layout: " + value);
    expect_refused(vkp_reference_reshape_and_cache_rotary(nullptr, &out_none, &none, &none, &none, &none,
                                                          VKP_ROTARY_NEOX, &out_none, &out_none, nullptr, layout),
                   "layout: " + value);
    with_cmd([&](VkCommandBuffer cmd) {
      vkp_reshape_and_cache_views reshape;
      vkp_reshape_and_cache_views_init(&reshape);
      reshape.layout = layout;
      expect_refused(vkp_record_reshape_and_cache(ctx_, cmd, &reshape, nullptr), "views.layout: " + value);
      vkp_rotary_inputs rotary;
      vkp_rotary_inputs_init(&rotary);
      expect_refused(vkp_record_reshape_and_cache_rotary(ctx_, cmd, &reshape, &rotary, nullptr),
                     "views.layout: " + value);
      vkp_gather_views gather;
      vkp_gather_views_init(&gather);
      gather.layout = layout;
      expect_refused(vkp_record_gather(ctx_, cmd, &gather, nullptr), "views.layout: " + value);
      vkp_layer_cache_views layers[2];
      vkp_layer_cache_views_init(&layers[0]);
      vkp_layer_cache_views_init(&layers[1]);
      layers[1].layout = layout;
      const vkp_block_copy pair{0, 1};
      expect_refused(vkp_record_copy_blocks(ctx_, cmd, layers, 2, &pair, 1), "layers[1].layout: " + value);
      expect_refused(vkp_record_swap_blocks(ctx_, cmd, layers, 1, &layers[1], 1, &pair, 1), "dst[0].layout: " + value);
    });
  }

  // Rotary styles.
  for (vkp_rotary_style style : {vkp_rotary_style(2), VKP_ROTARY_STYLE_MAX_ENUM}) {
    const std::string value = std::to_string(uint32_t(style)) + " is not a vkp_rotary_style";
    SCOPED_TRACE(value);
    const vkp_host_tensor none{};
    vkp_host_tensor out_none{};
    expect_refused(vkp_rotary_embedding(ctx_, nullptr, nullptr, &none, &none, style), "style: " + value);
    expect_refused(vkp_reference_rotary_embedding(nullptr, nullptr, &none, &none, style), "style: " + value);
    expect_refused(vkp_reference_reshape_and_cache_rotary(nullptr, &out_none, &none, &none, &none, &none, style,
                                                          &out_none, &out_none, nullptr, VKP_KV_LAYOUT_VLLM),
                   "style: " + value);
    with_cmd([&](VkCommandBuffer cmd) {
      vkp_rotary_views views;
      vkp_rotary_views_init(&views);
      views.style = style;
      expect_refused(vkp_record_rotary_embedding(ctx_, cmd, &views), "views.style: " + value);
      vkp_reshape_and_cache_views reshape;
      vkp_reshape_and_cache_views_init(&reshape);
      vkp_rotary_inputs rotary;
      vkp_rotary_inputs_init(&rotary);
      rotary.style = style;
      expect_refused(vkp_record_reshape_and_cache_rotary(ctx_, cmd, &reshape, &rotary, nullptr),
                     "rotary.style: " + value);
      vkp_new_tokens tokens;
      vkp_new_tokens_init(&tokens);
      expect_refused(vkp_kv_cache_record_reshape_and_cache(cache_, cmd, 0, &tokens, &rotary, nullptr),
                     "rotary.style: " + value);
    });
  }

  // Attention: the kernel and split of the options, the shape's booleans and dtypes.
  vkp_attention_plan* attention_plan = nullptr;
  vkp_attention_options attention_options;
  vkp_attention_options_init(&attention_options);
  attention_options.kernel = vkp_attention_kernel(7);
  expect_refused(vkp_attention_plan_create(ctx_, &attention_shape_, starts_, 3, &attention_options, &attention_plan),
                 "options.kernel: 7 is not a vkp_attention_kernel");
  attention_options.kernel = VKP_ATTENTION_KERNEL_MAX_ENUM;
  expect_refused(vkp_attention_plan_create(ctx_, &attention_shape_, starts_, 3, &attention_options, &attention_plan),
                 "options.kernel: 2147483647");
  vkp_attention_options_init(&attention_options);
  attention_options.split = vkp_split_mode(3);
  expect_refused(vkp_attention_plan_create(ctx_, &attention_shape_, starts_, 3, &attention_options, &attention_plan),
                 "options.split: 3 is not a vkp_split_mode");
  for (const std::string field : {"softcap", "alibi", "sinks", "lse", "tree_mask"}) {
    vkp_attention_shape shape = attention_shape_;
    vkp_bool32& flag = field == "softcap" ? shape.softcap
                       : field == "alibi" ? shape.alibi
                       : field == "sinks" ? shape.sinks
                       : field == "lse"   ? shape.lse
                                          : shape.tree_mask;
    flag = 3;
    expect_refused(vkp_attention_plan_create(ctx_, &shape, starts_, 3, nullptr, &attention_plan),
                   "shape." + field + ": 3 is not 0 or 1");
    vkp_attention_shape out = attention_shape_;
    expect_refused(vkp_kv_cache_attention_shape(cache_, &shape, &out),
                   "vkp_kv_cache_attention_shape: batch." + field + ": 3 is not 0 or 1");
  }
  vkp_attention_shape attention_dtype = attention_shape_;
  attention_dtype.cache_dtype = vkp_dtype(12);
  expect_refused(vkp_attention_plan_create(ctx_, &attention_dtype, starts_, 3, nullptr, &attention_plan),
                 "shape.cache_dtype: 12 is not a vkp_dtype");
  EXPECT_EQ(attention_plan, nullptr);
  vkp_attention_inputs attention_inputs;
  vkp_attention_inputs_init(&attention_inputs);
  vkp_attention_shape attention_out = attention_shape_;
  expect_refused(vkp_attention_shape_of(&attention_inputs, nullptr, 2, &attention_out), "want_lse: 2 is not 0 or 1");
  attention_inputs.cache_dtype = vkp_dtype(-2);
  expect_refused(vkp_attention_shape_of(&attention_inputs, nullptr, VKP_FALSE, &attention_out),
                 "inputs.cache_dtype: 4294967294 is not a vkp_dtype");

  // The log level.
  expect_refused(vkp_set_log_callback(nullptr, nullptr, vkp_log_level(4)), "min_level: 4 is not a vkp_log_level");
  expect_refused(vkp_set_log_callback(nullptr, nullptr, VKP_LOG_LEVEL_MAX_ENUM), "min_level: 2147483647");
  vkp_context_options context_options;
  vkp_context_options_init(&context_options);
  context_options.validation = 2;
  vkp_context* made_context = nullptr;
  expect_refused(vkp_context_create(&context_options, &made_context), "options.validation: 2 is not 0 or 1");
  vkp_context_options_init(&context_options);
  context_options.disable_subgroup_arithmetic = 3;
  expect_refused(vkp_context_create(&context_options, &made_context), "options.disable_subgroup_arithmetic: 3");
  vkp_context_options_init(&context_options);
  context_options.read_environment = 2;
  expect_refused(vkp_context_create(&context_options, &made_context), "options.read_environment: 2 is not 0 or 1");
  vkp_external_device external;
  vkp_external_device_init(&external);
  external.cooperative_matrix = 5;
  expect_refused(vkp_context_create_external(&external, &made_context), "external.cooperative_matrix: 5");
  vkp_external_device_init(&external);
  external.buffer_device_address = 2;
  expect_refused(vkp_context_create_external(&external, &made_context), "external.buffer_device_address: 2");
  for (const std::string field : {"vulkan_memory_model", "vulkan_memory_model_device_scope", "cooperative_matrix_khr"}) {
    vkp_external_device_init(&external);
    vkp_bool32& flag = field == "vulkan_memory_model"                ? external.vulkan_memory_model
                       : field == "vulkan_memory_model_device_scope" ? external.vulkan_memory_model_device_scope
                                                                     : external.cooperative_matrix_khr;
    flag = 9;
    expect_refused(vkp_context_create_external(&external, &made_context), "external." + field + ": 9 is not 0 or 1");
  }
  EXPECT_EQ(made_context, nullptr);
  vkp_block_manager_options manager_options;
  vkp_block_manager_options_init(&manager_options);
  manager_options.enable_prefix_caching = 2;
  vkp_block_manager* made_manager = nullptr;
  expect_refused(vkp_block_manager_create(8, 16, &manager_options, &made_manager),
                 "options.enable_prefix_caching: 2 is not 0 or 1");
  vkp_decode_inputs inputs;
  vkp_decode_inputs_init(&inputs);
  vkp_decode_shape out = shape_;
  expect_refused(vkp_decode_shape_of(&inputs, 2, &out), "want_lse: 2 is not 0 or 1");
  vkp_layer_cache_views layer;
  vkp_layer_cache_views_init(&layer);
  expect_refused(vkp_kv_cache_layer(cache_, 0, 2, &layer), "host: 2 is not 0 or 1");
  int32_t refs = 0;
  expect_refused(vkp_block_manager_ref_count(manager_, 9, 0, &refs), "host: 9 is not 0 or 1");
  vkp_device_info info;
  vkp_device_info_init(&info);
  ASSERT_VKP_OK(vkp_context_device_info(ctx_, &info));
  info.timestamps = 4;
  vkp_kv_cache_sizing sizing;
  vkp_kv_cache_sizing_init(&sizing);
  expect_refused(vkp_kv_cache_plan(&info, &cache_shape_, &cache_options_, &sizing), "device.timestamps: 4");
  info.timestamps = VKP_FALSE;
  info.cooperative_matrix_khr = 3;
  expect_refused(vkp_kv_cache_plan(&info, &cache_shape_, &cache_options_, &sizing), "device.cooperative_matrix_khr: 3");
  info.cooperative_matrix_khr = VKP_FALSE;
  info.vulkan_memory_model_device_scope = 8;
  expect_refused(vkp_kv_cache_plan(&info, &cache_shape_, &cache_options_, &sizing),
                 "device.vulkan_memory_model_device_scope: 8");
}

// Negative numbers where counts, sizes and indices go, and counts no array could have (a
// negative count passed as size_t), are refused naming the argument.
TEST_F(CApiHostileTest, NegativeAndImpossibleCountsAreRefused) {
  const size_t minus_one = size_t(-1);
  vkp_block_manager* made = nullptr;
  expect_refused(vkp_block_manager_create(-1, 16, nullptr, &made), "num_blocks");
  expect_refused(vkp_block_manager_create(8, -16, nullptr, &made), "block_size");
  vkp_block_manager_options options;
  vkp_block_manager_options_init(&options);
  options.num_host_blocks = -4;
  expect_refused(vkp_block_manager_create(8, 16, &options, &made), "num_host_blocks");
  EXPECT_EQ(made, nullptr);

  const int32_t prompt[] = {1, 2, 3, 4, 5};
  vkp_admission admission;
  expect_refused(vkp_block_manager_can_allocate(manager_, prompt, minus_one, &admission),
                 "prompt: a count of 18446744073709551615 is more than any array holds (a negative count?)");
  expect_refused(vkp_block_manager_add_sequence(manager_, 1, prompt, minus_one, nullptr), "prompt: a count of");
  ASSERT_VKP_OK(vkp_block_manager_add_sequence(manager_, 1, prompt, 5, nullptr));
  const uint64_t ids[] = {1};
  vkp_bool32 can;
  expect_refused(vkp_block_manager_can_swap_out(manager_, ids, minus_one, &can), "seq_ids: a count of");
  const int32_t* table = nullptr;
  size_t count = 0;
  expect_refused(vkp_block_manager_block_table(manager_, 1, -1, &table, &count), "width: -1");
  int32_t tables[4], lens[1];
  expect_refused(vkp_block_manager_build_batch(manager_, ids, 1, -3, tables, lens), "width: -3 is negative");
  int64_t slots[4];
  expect_refused(vkp_block_manager_slot_mapping(manager_, 1, -1, 1, slots), "first_token: -1 is negative");
  expect_refused(vkp_block_manager_slot_mapping(manager_, 1, 0, -2, slots), "count: -2 is negative");
  int32_t refs = 0;
  expect_refused(vkp_block_manager_ref_count(manager_, VKP_FALSE, -1, &refs), "-1");
  expect_refused(vkp_block_manager_ref_count(manager_, VKP_FALSE, 8, &refs), "8");

  vkp_tensor_view t{};
  const int64_t dims[] = {2, -3};
  expect_refused(vkp_buffer_tensor(buffer_, VKP_DTYPE_F32, dims, 2, 0, &t), "shape[1] is negative (-3)");
  expect_refused(vkp_buffer_tensor(buffer_, VKP_DTYPE_F32, dims, -1, 0, &t), "rank -1 is outside [0, 5]");
  float data[4] = {};
  vkp_host_tensor x{data, VKP_DTYPE_F32, -2, {4}};
  float amax = 0;
  expect_refused(vkp_reference_absmax(&x, &amax), "x: rank -2");
  x = {data, VKP_DTYPE_F32, 1, {-4}};
  expect_refused(vkp_reference_absmax(&x, &amax), "x: shape[0] is negative (-4)");
  x = {data, VKP_DTYPE_F32, 2, {int64_t(1) << 40, int64_t(1) << 40}};
  expect_refused(vkp_reference_absmax(&x, &amax), "x: shape: [1099511627776, 1099511627776] has more than 2^63");

  vkp_bandwidth bandwidth;
  vkp_bandwidth_init(&bandwidth);
  expect_refused(vkp_measure_read_bandwidth(ctx_, 1024, -1, &bandwidth), "repetitions: must be at least 1, got -1");
  expect_refused(vkp_measure_streaming_read(ctx_, read_, -5, &bandwidth), "repetitions: must be at least 1, got -5");

  vkp_layer_cache_views layer;
  vkp_layer_cache_views_init(&layer);
  expect_refused(vkp_kv_cache_layer(cache_, 0xFFFFFFFFu, VKP_FALSE, &layer), "4294967295");
  const vkp_block_copy pairs[] = {{0, 1}};
  vkp_host_tensor none{};
  expect_refused(vkp_reference_copy_blocks(&none, &none, pairs, minus_one, VKP_KV_LAYOUT_VLLM), "pairs: a count of");
  with_cmd([&](VkCommandBuffer cmd) {
    expect_refused(vkp_kv_cache_record_copy_blocks(cache_, cmd, pairs, minus_one), "pairs: a count of");
    expect_refused(vkp_record_copy_blocks(ctx_, cmd, &layer, minus_one, pairs, 1), "layers: a count of");
    expect_refused(vkp_record_swap_blocks(ctx_, cmd, &layer, 1, &layer, minus_one, pairs, 1), "dst: a count of");
    const vkp_block_copy negative[] = {{-1, 2}};
    expect_refused(vkp_kv_cache_record_copy_blocks(cache_, cmd, negative, 1), "pairs[0].src");
  });
  vkp_attention_plan* attention_plan = nullptr;
  expect_refused(vkp_attention_plan_create(ctx_, &attention_shape_, starts_, minus_one, nullptr, &attention_plan),
                 "query_starts: a count of 18446744073709551615");
  expect_refused(vkp_attention_plan_create(ctx_, &attention_shape_, starts_, 2, nullptr, &attention_plan),
                 "query_starts: 2 entries, expected S + 1 = 3");
  const int32_t negative_starts[] = {0, -1, 3};
  expect_refused(vkp_attention_plan_create(ctx_, &attention_shape_, negative_starts, 3, nullptr, &attention_plan),
                 "query_starts[1]: -1");
  EXPECT_EQ(attention_plan, nullptr);
  vkp_decode_shape shape = shape_;
  shape.num_seqs = 0xFFFFFFFFu;  // -1 as uint32_t
  vkp_decode_plan* plan = nullptr;
  EXPECT_NE(vkp_decode_plan_create(ctx_, &shape, nullptr, &plan), VKP_OK);
  EXPECT_NE(std::string(vkp_last_error()).find("num_seqs"), std::string::npos) << vkp_last_error();
  EXPECT_EQ(plan, nullptr);
}

// issue 30: vkp_buffer_view_of(b, 0, 1 << 20) on a 256-byte buffer, then vkp_upload of 8192
// bytes, corrupted the heap. A view past a buffer vkpaged made is refused where it is made and
// wherever one is used, with nothing written.
TEST_F(CApiHostileTest, ViewsOutsideABufferVkpagedMadeAreRefused) {
  EXPECT_EQ(vkp_buffer_size(buffer_), 256u);
  std::vector<uint8_t> bytes(8192, 0x5A);
  std::memset(vkp_buffer_mapped(buffer_), 0, 256);

  const vkp_buffer_view past = vkp_buffer_view_of(buffer_, 0, 1 << 20);
  EXPECT_EQ(past.buffer, VK_NULL_HANDLE);
  EXPECT_EQ(past.size, 0u);
  expect_refused(VKP_ERROR_INVALID_ARGUMENT, "vkp_buffer_view_of: view: 1048576 bytes at offset 0 lie outside the buffer's 256 bytes");
  expect_refused(vkp_upload(ctx_, &past, bytes.data(), 8192), "dst: no buffer");
  EXPECT_EQ(vkp_buffer_view_of(buffer_, 257, 0).buffer, VK_NULL_HANDLE);
  EXPECT_EQ(vkp_buffer_view_of(buffer_, 128, 129).buffer, VK_NULL_HANDLE);
  EXPECT_EQ(vkp_buffer_view_of(buffer_, std::numeric_limits<VkDeviceSize>::max(), 2).buffer, VK_NULL_HANDLE);
  EXPECT_NE(vkp_buffer_view_of(buffer_, 128, 128).buffer, VK_NULL_HANDLE);
  EXPECT_STREQ(vkp_last_error(), "") << "a view that fits clears the message";

  // The same view made by hand: refused by the upload and the download themselves.
  const vkp_buffer_view by_hand{vkp_buffer_handle(buffer_), 0, 1 << 20};
  expect_refused(vkp_upload(ctx_, &by_hand, bytes.data(), 8192),
                 "vkp_upload: upload: dst: a view of 1048576 bytes at offset 0 lies outside its buffer of 256 bytes");
  expect_refused(vkp_download(ctx_, &by_hand, bytes.data(), 8192), "download: src: a view of 1048576 bytes");
  const vkp_buffer_view shifted{vkp_buffer_handle(buffer_), 200, 100};
  expect_refused(vkp_upload(ctx_, &shifted, bytes.data(), 100), "at offset 200 lies outside its buffer of 256 bytes");
  EXPECT_EQ(static_cast<const uint8_t*>(vkp_buffer_mapped(buffer_))[255], 0) << "a refused upload wrote";
  EXPECT_EQ(bytes[0], 0x5A) << "a refused download wrote";
  vkp_tensor_view t{};
  const int64_t too_many[] = {65};
  expect_refused(vkp_buffer_tensor(buffer_, VKP_DTYPE_F32, too_many, 1, 0, &t),
                 "tensor: f32 [65] (260 bytes) at offset 0 lies outside the buffer's 256 bytes");
  const int64_t fits[] = {32};
  expect_refused(vkp_buffer_tensor(buffer_, VKP_DTYPE_F32, fits, 1, 160, &t), "at offset 160");

  // Every operator refuses such a view before recording.
  vkp_tensor_view big = whole(DType::f32, 64);
  big.shape[0] = 1024;
  big.memory.size = 4096;
  vkp_layer_cache_views layer;
  vkp_layer_cache_views_init(&layer);
  ASSERT_VKP_OK(vkp_kv_cache_layer(cache_, 0, VKP_FALSE, &layer));
  vkp_layer_cache_views shifted_layer = layer;
  shifted_layer.value_cache.memory.offset += 16;
  const vkp_block_copy pair{0, 1};
  with_cmd([&](VkCommandBuffer cmd) {
    expect_refused(vkp_record_fill_random(ctx_, cmd, &big, 1), "lies outside its buffer of 256 bytes");
    const vkp_tensor_view small = whole(DType::f32, 4);
    vkp_buffer_view amax = small.memory;
    amax.offset = 256;
    amax.size = 4;
    expect_refused(vkp_record_absmax(ctx_, cmd, &small, &amax), "amax_out: a view of 4 bytes at offset 256");
    expect_refused(vkp_record_absmax(ctx_, cmd, &big, &small.memory), "x: a view of 4096 bytes");
    const vkp_buffer_view sink = vkp_buffer_view_of(buffer_, 0, 16);
    expect_refused(vkp_record_streaming_read_of(ctx_, cmd, &big.memory, &sink), "data: a view of 4096 bytes");
    vkp_buffer_view past_sink = sink;
    past_sink.offset = 256;
    expect_refused(vkp_record_streaming_read_of(ctx_, cmd, &small.memory, &past_sink), "sink: a view of 16 bytes at offset 256");
    expect_refused(vkp_record_copy_blocks(ctx_, cmd, &shifted_layer, 1, &pair, 1),
                   "layers[0].value_cache: a view of");
    vkp_merge_views merge;
    vkp_merge_views_init(&merge);
    merge.output_a = merge.output_b = merge.output = big;
    merge.output_a.rank = merge.output_b.rank = merge.output.rank = 3;
    merge.output_a.shape[0] = merge.output_b.shape[0] = merge.output.shape[0] = 4;
    merge.output_a.shape[1] = merge.output_b.shape[1] = merge.output.shape[1] = 4;
    merge.output_a.shape[2] = merge.output_b.shape[2] = merge.output.shape[2] = 64;
    merge.lse_a = merge.lse_b = whole(DType::f32, 16);
    merge.lse_a.rank = merge.lse_b.rank = 2;
    merge.lse_a.shape[0] = merge.lse_b.shape[0] = 4;
    merge.lse_a.shape[1] = merge.lse_b.shape[1] = 4;
    expect_refused(vkp_record_merge_attention(ctx_, cmd, &merge), "output_a: a view of 4096 bytes");
  });
}

// A context with buffers, plans, caches or reads still live is not destroyed (their Vulkan
// objects would outlive its device); it says which, and stays usable.
TEST_F(CApiHostileTest, AContextWithLiveObjectsIsNotDestroyed) {
  vkp_external_device ext = shared_device();
  vkp_context* own = nullptr;
  ASSERT_VKP_OK(vkp_context_create_external(&ext, &own));
  vkp_buffer* a = nullptr;
  vkp_buffer* b = nullptr;
  ASSERT_VKP_OK(vkp_buffer_create(own, 64, VKP_MEMORY_DEVICE, &a));
  ASSERT_VKP_OK(vkp_buffer_create(own, 64, VKP_MEMORY_DEVICE, &b));
  vkp_decode_plan* plan = nullptr;
  ASSERT_VKP_OK(vkp_decode_plan_create(own, &shape_, nullptr, &plan));
  vkp_attention_plan* attention_plan = nullptr;
  ASSERT_VKP_OK(vkp_attention_plan_create(own, &attention_shape_, starts_, 3, nullptr, &attention_plan));
  vkp_context_destroy(own);
  expect_refused(destroy_failed(),
                 "vkp_context_destroy: context: 2 vkp_buffer, 1 vkp_decode_plan, 1 vkp_attention_plan made on it still live");
  vkp_attention_plan_destroy(attention_plan);
  uint32_t messages = 1;
  EXPECT_VKP_OK(vkp_context_validation_message_count(own, &messages));
  vkp_buffer_destroy(a);
  vkp_buffer_destroy(b);
  vkp_buffer_destroy(b);  // twice: ignored, said
  expect_refused(destroy_failed(), "vkp_buffer_destroy: buffer: ");
  vkp_decode_plan_destroy(plan);
  vkp_context_destroy(own);
  EXPECT_STREQ(vkp_last_error(), "");
  expect_refused(vkp_context_validation_message_count(own, &messages), "is not a live vkp_context");
}

}  // namespace
}  // namespace vkpaged::test
