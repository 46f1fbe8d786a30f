// SPDX-License-Identifier: Apache-2.0
// The C ABI cannot change silently: every public struct's size and every field's offset against
// the committed table (abi_table.inc), and the struct_size rule of extensible structs: a size no
// release had is refused naming the struct, an older caller's struct is read only up to its
// size with defaults past it, and outputs are written only up to the caller's size.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

#include "c_api/c_api_fields.hpp"
#include "c_api/c_api_structs.hpp"
#include "c_api/c_api_test_helpers.hpp"

// A struct of a simulated later release: `appended` came after a release whose header ended
// the struct at `b` (12 bytes). Only the size-check helpers see it, as they see vkpaged's own.
struct test_options {
  uint32_t struct_size;
  uint32_t a;
  float b;
  uint32_t appended;
};

namespace vkpaged::c_api {
VKP_STRUCT_ABI(test_options, 12)
template <>
test_options defaults_of<test_options>() {
  return {uint32_t(sizeof(test_options)), 1, 2.0f, 77};
}
}  // namespace vkpaged::c_api

namespace vkpaged::test {
namespace {

using namespace c_api_helpers;

// ---- the table ----

struct StructRow {
  std::string name;
  size_t size, align;
  bool extensible;
  size_t actual_size, actual_align;
  std::vector<uint32_t> known_sizes;  // the library's size table; empty for plain structs
};
struct FieldRow {
  std::string type, field;
  size_t offset, size, actual_offset, actual_size;
};
struct EnumRow {
  std::string name;
  size_t size, actual_size;
};

// The sizes the library accepts for T, where T is extensible.
template <typename T>
std::vector<uint32_t> library_sizes() {
  if constexpr (requires { c_api::StructAbi<T>::sizes; })
    return {std::begin(c_api::StructAbi<T>::sizes), std::end(c_api::StructAbi<T>::sizes)};
  else
    return {};
}

struct Table {
  std::vector<StructRow> structs;
  std::vector<FieldRow> fields;
  std::vector<EnumRow> enums;
};

Table committed_table() {
  Table t;
#define VKP_ABI_STRUCT(T, size, align, ext) \
  t.structs.push_back({#T, size, align, ext == 1, sizeof(T), alignof(T), library_sizes<T>()});
#define VKP_ABI_FIELD(T, f, offset, size) \
  t.fields.push_back({#T, #f, offset, size, offsetof(T, f), sizeof(static_cast<T*>(nullptr)->f)});
#define VKP_ABI_ENUM(E, size) t.enums.push_back({#E, size, sizeof(E)});
#include "c_api/abi_table.inc"
#undef VKP_ABI_STRUCT
#undef VKP_ABI_FIELD
#undef VKP_ABI_ENUM
  return t;
}

TEST(CApiAbiTest, StructLayoutsMatchTheCommittedTable) {
#if !(defined(__x86_64__) && defined(__LP64__))
  GTEST_SKIP() << "the committed table is x86-64 LP64's";
#endif
  const Table t = committed_table();
  ASSERT_EQ(t.structs.size(), 46u) << "a struct was added to or removed from abi_table.inc";
  for (const StructRow& s : t.structs) {
    SCOPED_TRACE(s.name);
    EXPECT_EQ(s.actual_size, s.size) << "table: VKP_ABI_STRUCT(" << s.name << ", " << s.actual_size << ", "
                                     << s.actual_align << ", " << s.extensible << ")";
    EXPECT_EQ(s.actual_align, s.align);
    // Extensible structs, and only they, are in the library's size table, which ends at sizeof.
    if (s.extensible) {
      ASSERT_FALSE(s.known_sizes.empty()) << s.name << " is extensible but not in c_api_structs.hpp's size table";
      EXPECT_EQ(s.known_sizes.back(), s.actual_size);
    } else {
      EXPECT_TRUE(s.known_sizes.empty()) << s.name << " is a plain value struct in the table";
    }
    // The fields tile the struct: no hidden field, no implicit padding, struct_size first in
    // extensible ones.
    size_t end = 0, count = 0;
    for (const FieldRow& f : t.fields) {
      if (f.type != s.name) continue;
      EXPECT_EQ(f.actual_offset, f.offset) << "table: VKP_ABI_FIELD(" << f.type << ", " << f.field << ", "
                                           << f.actual_offset << ", " << f.actual_size << ")";
      EXPECT_EQ(f.actual_size, f.size) << "table: VKP_ABI_FIELD(" << f.type << ", " << f.field << ", "
                                       << f.actual_offset << ", " << f.actual_size << ")";
      EXPECT_EQ(f.actual_offset, end) << f.field << ": bytes [" << end << ", " << f.actual_offset
                                      << ") belong to no field of the table (a field added, or implicit padding)";
      if (count == 0) EXPECT_EQ(f.field == "struct_size", s.extensible) << "struct_size is the first field of extensible structs";
      end = f.actual_offset + f.actual_size;
      ++count;
    }
    EXPECT_GT(count, 0u);
    EXPECT_EQ(end, s.actual_size) << "bytes [" << end << ", " << s.actual_size
                                  << ") after the last field: a field added, or implicit padding";
  }
  for (const EnumRow& e : t.enums) {
    EXPECT_EQ(e.actual_size, e.size) << e.name;
    EXPECT_EQ(e.actual_size, 4u) << e.name << ": enums are 32 bits (a _MAX_ENUM = 0x7FFFFFFF member)";
  }
  EXPECT_EQ(t.enums.size(), 15u) << "an enum was added to or removed from abi_table.inc";
}

// The field lists the C conversions expand (src/c_api/c_api_fields.hpp) name every field of
// their struct's rows in the table, in order: a field added to a C struct and not to its list
// (so never converted) fails here, as does a list entry the struct lacks or moved.
TEST(CApiAbiTest, FieldListsNameEveryFieldOfTheirStructs) {
  const Table t = committed_table();
  struct Listed {
    std::string type;
    std::vector<std::string> fields;
  };
  std::vector<Listed> lists;
#define VKP_LIST_FIELD(f) lists.back().fields.push_back(#f);
#define VKP_LIST(T, LIST)        \
  lists.push_back({#T, {}});     \
  LIST(VKP_LIST_FIELD)
  VKP_FIELD_LISTS(VKP_LIST)
#undef VKP_LIST
#undef VKP_LIST_FIELD
  EXPECT_EQ(lists.size(), 24u) << "a list was added to or removed from VKP_FIELD_LISTS";
  for (const Listed& l : lists) {
    SCOPED_TRACE(l.type);
    std::vector<std::string> table_fields;
    for (const FieldRow& f : t.fields)
      if (f.type == l.type && f.field != "struct_size" && f.field.rfind("reserved", 0) != 0) table_fields.push_back(f.field);
    ASSERT_FALSE(table_fields.empty()) << l.type << " has no rows in abi_table.inc";
    EXPECT_EQ(l.fields, table_fields);
  }
}

// ---- memory that ends where a struct ends: a read or write past it faults ----

class GuardedPage {
 public:
  GuardedPage() : page_(size_t(sysconf(_SC_PAGESIZE))) {
    void* p = mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    base_ = static_cast<unsigned char*>(p);
    EXPECT_EQ(mprotect(base_ + page_, page_, PROT_NONE), 0);
  }
  ~GuardedPage() { munmap(base_, 2 * page_); }
  GuardedPage(const GuardedPage&) = delete;
  GuardedPage& operator=(const GuardedPage&) = delete;

  // `bytes` bytes (a multiple of T's alignment) that end at the inaccessible page, filled
  // with 0xAB, as a T*.
  template <typename T>
  T* ending_at_guard(size_t bytes) {
    unsigned char* p = base_ + page_ - bytes;
    std::memset(base_, 0xAB, page_);
    return reinterpret_cast<T*>(p);
  }

 private:
  size_t page_;
  unsigned char* base_ = nullptr;
};

// A caller built against the older header passes 12 bytes: the library reads exactly those and
// takes the default for the field it did not know; the current size is read whole; other
// sizes are refused naming the argument, the struct, the value and the known sizes.
TEST(CApiAbiTest, AnOlderCallerIsServedWithDefaultsAndNeverReadPastItsSize) {
  GuardedPage page;
  auto* old_caller = page.ending_at_guard<test_options>(12);
  const uint32_t old_fields[] = {12, 5, 0};
  std::memcpy(old_caller, old_fields, 12);
  old_caller->b = 3.5f;
  const test_options got = c_api::read_struct(old_caller, "options");
  EXPECT_EQ(got.a, 5u);
  EXPECT_EQ(got.b, 3.5f);
  EXPECT_EQ(got.appended, 77u) << "the field past the caller's size takes its default, never the bytes after it";

  auto* new_caller = page.ending_at_guard<test_options>(sizeof(test_options));
  *new_caller = {uint32_t(sizeof(test_options)), 6, 4.5f, 9};
  EXPECT_EQ(c_api::read_struct(new_caller, "options").appended, 9u);
  EXPECT_EQ(c_api::read_optional_struct<test_options>(nullptr, "options").appended, 77u);

  for (uint32_t size : {0u, 8u, 13u, 20u, 0xFFFFFFFFu}) {
    new_caller->struct_size = size;
    const vkp_status status = c_api::guarded("f", [&] { c_api::read_struct(new_caller, "options"); });
    expect_refused(status, "f: options: test_options.struct_size: " + std::to_string(size) +
                               " is not a size this library knows (12, 16)");
  }

  // An output reaches only the caller's 12 bytes (the guard page follows them).
  auto* old_out = page.ending_at_guard<test_options>(12);
  old_out->struct_size = 12;
  const c_api::StructOut out(old_out, "out");
  out.set({uint32_t(sizeof(test_options)), 8, 1.5f, 99});
  EXPECT_EQ(old_out->struct_size, 12u) << "the caller's size stays";
  EXPECT_EQ(old_out->a, 8u);
  EXPECT_EQ(old_out->b, 1.5f);

  // init_sized writes the defaults up to the size asked for and refuses any other size
  // without writing.
  auto* init = page.ending_at_guard<test_options>(12);
  ASSERT_VKP_OK(c_api::init_struct("init", init, 12));
  EXPECT_EQ(init->struct_size, 12u);
  EXPECT_EQ(init->a, 1u);
  EXPECT_EQ(init->b, 2.0f);
  auto* wrong = page.ending_at_guard<test_options>(sizeof(test_options));
  expect_refused(c_api::init_struct("init", wrong, 14), "init: test_options.struct_size: 14 is not a size");
  EXPECT_EQ(wrong->struct_size, 0xABABABABu) << "a refused init wrote";
  expect_refused(c_api::init_struct<test_options>("init", nullptr, 12), "init: test_options is NULL");

  // Arrays: the first element's size is the stride, and every element repeats it.
  auto* array = page.ending_at_guard<test_options>(24);
  const uint32_t two_old[] = {12, 1, 0, 12, 2, 0};
  std::memcpy(array, two_old, 24);
  const std::vector<test_options> read = c_api::read_struct_array(array, 2, "layers");
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[1].a, 2u);
  EXPECT_EQ(read[1].appended, 77u);
  reinterpret_cast<uint32_t*>(array)[3] = 16;
  expect_refused(c_api::guarded("f", [&] { c_api::read_struct_array(array, 2, "layers"); }),
                 "layers[1]: test_options.struct_size: 16 differs from layers[0]'s 12");
}

class CApiAbiGpuTest : public GpuTest {};

// vkpaged's own structs: a caller's struct that ends at an inaccessible page is read and
// written within its struct_size by real calls.
TEST_F(CApiAbiGpuTest, RealStructsAreReadAndWrittenWithinTheirSize) {
  GuardedPage options_page, info_page, shape_page;
  auto* options = options_page.ending_at_guard<vkp_decode_options>(sizeof(vkp_decode_options));
  ASSERT_VKP_OK(vkp_decode_options_init(options));
  auto* shape = shape_page.ending_at_guard<vkp_decode_shape>(sizeof(vkp_decode_shape));
  ASSERT_VKP_OK(vkp_decode_shape_init(shape));
  shape->num_seqs = 2;
  shape->num_heads = 4;
  shape->num_kv_heads = 4;
  shape->head_size = 64;
  shape->block_size = 16;
  shape->num_blocks = 4;
  shape->max_blocks_per_seq = 2;
  vkp_decode_plan* plan = nullptr;
  ASSERT_VKP_OK(vkp_decode_plan_create(c_context(), shape, options, &plan));
  auto* info = info_page.ending_at_guard<vkp_decode_plan_info>(sizeof(vkp_decode_plan_info));
  ASSERT_VKP_OK(vkp_decode_plan_info_init(info));
  EXPECT_VKP_OK(vkp_decode_plan_info_get(plan, info));
  EXPECT_EQ(info->num_partitions, 1u);
  EXPECT_EQ(info->reserved0, 0u);

  // A size no release had is refused, naming the argument and the struct; nothing is made.
  vkp_decode_plan* refused = nullptr;
  options->struct_size = 48;  // its size before the per-call values moved to vkp_decode_params
  expect_refused(vkp_decode_plan_create(c_context(), shape, options, &refused),
                 "vkp_decode_plan_create: options: vkp_decode_options.struct_size: 48 is not a size this library "
                 "knows (28)");
  EXPECT_EQ(refused, nullptr);
  options->struct_size = 0;  // never initialised
  expect_refused(vkp_decode_plan_create(c_context(), shape, options, &refused), "; vkp_decode_options_init sets it");
  info->struct_size = 136;  // the size vkp_decode_plan_info had inside 0.1.0
  expect_refused(vkp_decode_plan_info_get(plan, info), "out: vkp_decode_plan_info.struct_size: 136");
  vkp_decode_plan_destroy(plan);
}

// Every init_sized fills in its struct for the current size, refuses every other size naming
// the struct and the value, and then writes nothing.
TEST(CApiAbiTest, EveryInitRefusesSizesNoReleaseHad) {
  auto check = [](const char* name, auto init_sized, auto* s, size_t size) {
    SCOPED_TRACE(name);
    std::vector<unsigned char> bytes(size + 64, 0xCD);
    auto* p = reinterpret_cast<std::remove_pointer_t<decltype(s)>*>(bytes.data());
    for (size_t wrong : {size_t(0), size - 4, size + 4, size + 8}) {
      expect_refused(init_sized(p, uint32_t(wrong)),
                     std::string(name) + ".struct_size: " + std::to_string(wrong) + " is not a size this library knows");
      EXPECT_EQ(bytes[0], 0xCD) << "a refused init wrote";
    }
    ASSERT_VKP_OK(init_sized(p, uint32_t(size)));
    uint32_t written = 0;
    std::memcpy(&written, bytes.data(), 4);
    EXPECT_EQ(written, size);
    EXPECT_EQ(bytes[size], 0xCD) << "init wrote past the struct";
    expect_refused(init_sized(nullptr, uint32_t(size)), std::string(name) + " is NULL");
  };
#define VKP_CHECK_INIT(T) check(#T, T##_init_sized, static_cast<T*>(nullptr), sizeof(T))
  VKP_CHECK_INIT(vkp_device_info);
  VKP_CHECK_INIT(vkp_cooperative_matrix_shape);
  VKP_CHECK_INIT(vkp_context_options);
  VKP_CHECK_INIT(vkp_external_device);
  VKP_CHECK_INIT(vkp_vulkan_handles);
  VKP_CHECK_INIT(vkp_decode_shape);
  VKP_CHECK_INIT(vkp_decode_options);
  VKP_CHECK_INIT(vkp_decode_params);
  VKP_CHECK_INIT(vkp_decode_plan_info);
  VKP_CHECK_INIT(vkp_decode_views);
  VKP_CHECK_INIT(vkp_decode_inputs);
  VKP_CHECK_INIT(vkp_attention_shape);
  VKP_CHECK_INIT(vkp_attention_options);
  VKP_CHECK_INIT(vkp_attention_plan_info);
  VKP_CHECK_INIT(vkp_attention_views);
  VKP_CHECK_INIT(vkp_attention_inputs);
  VKP_CHECK_INIT(vkp_cache_scales);
  VKP_CHECK_INIT(vkp_reshape_and_cache_views);
  VKP_CHECK_INIT(vkp_layer_cache_views);
  VKP_CHECK_INIT(vkp_gather_views);
  VKP_CHECK_INIT(vkp_rotary_views);
  VKP_CHECK_INIT(vkp_rotary_inputs);
  VKP_CHECK_INIT(vkp_bandwidth);
  VKP_CHECK_INIT(vkp_merge_views);
  VKP_CHECK_INIT(vkp_kv_cache_shape);
  VKP_CHECK_INIT(vkp_kv_cache_options);
  VKP_CHECK_INIT(vkp_kv_cache_sizing);
  VKP_CHECK_INIT(vkp_kv_cache_info);
  VKP_CHECK_INIT(vkp_new_tokens);
  VKP_CHECK_INIT(vkp_mla_cache_views);
  VKP_CHECK_INIT(vkp_mla_reshape_and_cache_views);
  VKP_CHECK_INIT(vkp_mla_rope_views);
  VKP_CHECK_INIT(vkp_mla_new_tokens);
  VKP_CHECK_INIT(vkp_mla_options);
  VKP_CHECK_INIT(vkp_mla_plan_info);
  VKP_CHECK_INIT(vkp_mla_views);
  VKP_CHECK_INIT(vkp_block_manager_options);
  VKP_CHECK_INIT(vkp_append_result);
  VKP_CHECK_INIT(vkp_block_usage);
  VKP_CHECK_INIT(vkp_prefix_cache_stats);
#undef VKP_CHECK_INIT

  // The defaults the inits fill in are the C++ API's.
  vkp_decode_options o;
  ASSERT_VKP_OK(vkp_decode_options_init(&o));
  EXPECT_EQ(o.kernel, VKP_KERNEL_AUTOMATIC);
  EXPECT_EQ(o.merge, VKP_MERGE_REDUCE_PASS);
  vkp_decode_params params;
  ASSERT_VKP_OK(vkp_decode_params_init(&params));
  EXPECT_EQ(params.k_scale, 1.0f);
  EXPECT_EQ(params.v_scale, 1.0f);
  EXPECT_EQ(params.has_scale, VKP_FALSE);
  EXPECT_EQ(params.softcap, 0.0f);
  vkp_context_options context_options;
  ASSERT_VKP_OK(vkp_context_options_init(&context_options));
  EXPECT_EQ(context_options.fence_timeout_ms, ContextOptions{}.fence_timeout_ms);
  EXPECT_EQ(context_options.fence_timeout_ms, 60000u);
  EXPECT_EQ(context_options.read_environment, VKP_FALSE) << "an engine's context reads no environment";
  vkp_external_device external;
  ASSERT_VKP_OK(vkp_external_device_init(&external));
  EXPECT_EQ(external.fence_timeout_ms, ExternalDevice{}.fence_timeout_ms);
  EXPECT_EQ(external.cooperative_matrix_khr, VKP_FALSE);
  vkp_decode_shape decode_shape;
  ASSERT_VKP_OK(vkp_decode_shape_init(&decode_shape));
  EXPECT_EQ(decode_shape.kv_layout, VKP_KV_LAYOUT_VLLM);
  EXPECT_EQ(decode_shape.softcap, VKP_FALSE);
  EXPECT_EQ(decode_shape.query_dtype, VKP_DTYPE_F16);
  vkp_attention_shape attention_shape;
  ASSERT_VKP_OK(vkp_attention_shape_init(&attention_shape));
  EXPECT_EQ(attention_shape.cache_dtype, VKP_DTYPE_F16);
  EXPECT_EQ(attention_shape.kv_layout, VKP_KV_LAYOUT_VLLM);
  vkp_attention_options attention_options;
  ASSERT_VKP_OK(vkp_attention_options_init(&attention_options));
  EXPECT_EQ(attention_options.kernel, VKP_ATTENTION_KERNEL_AUTOMATIC);
  EXPECT_EQ(attention_options.split, VKP_SPLIT_AUTOMATIC);
  vkp_attention_inputs attention_inputs;
  ASSERT_VKP_OK(vkp_attention_inputs_init(&attention_inputs));
  EXPECT_EQ(attention_inputs.cache_dtype, VKP_DTYPE_F16);
  EXPECT_EQ(attention_inputs.query_starts.data, nullptr);
  vkp_rotary_inputs rotary;
  ASSERT_VKP_OK(vkp_rotary_inputs_init(&rotary));
  EXPECT_EQ(rotary.style, VKP_ROTARY_NEOX);
  vkp_cache_scales scales;
  ASSERT_VKP_OK(vkp_cache_scales_init(&scales));
  EXPECT_EQ(scales.v_scale, 1.0f);
  vkp_kv_cache_shape shape;
  ASSERT_VKP_OK(vkp_kv_cache_shape_init(&shape));
  EXPECT_EQ(shape.block_size, 16u);
  EXPECT_EQ(shape.dtype, VKP_DTYPE_F16);
  EXPECT_EQ(shape.layout, VKP_KV_LAYOUT_VLLM);
  vkp_block_manager_options manager;
  ASSERT_VKP_OK(vkp_block_manager_options_init(&manager));
  EXPECT_EQ(manager.enable_prefix_caching, VKP_TRUE);
  EXPECT_EQ(manager.watermark, 0.01);
  vkp_decode_inputs inputs;
  ASSERT_VKP_OK(vkp_decode_inputs_init(&inputs));
  EXPECT_EQ(inputs.cache_dtype, VKP_DTYPE_F16);
  EXPECT_EQ(inputs.query.data, nullptr);
}

}  // namespace
}  // namespace vkpaged::test
