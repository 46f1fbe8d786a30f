// SPDX-License-Identifier: Apache-2.0
#include "names.hpp"

#include <array>
#include <utility>

#include "bindings.hpp"

namespace vkpaged::python {

namespace {

template <typename E, size_t N>
using Table = std::array<std::pair<std::string_view, E>, N>;

template <typename E, size_t N>
E parse(const Table<E, N>& table, std::string_view argument, std::string_view name) {
  std::string accepted;
  for (const auto& [n, value] : table) {
    if (n == name) return value;
    accepted += accepted.empty() ? "" : ", ";
    accepted += n;
  }
  refuse(std::string(argument) + ": '" + std::string(name) + "' is not one of " + accepted);
}

template <typename E, size_t N>
std::string name(const Table<E, N>& table, E value) {
  for (const auto& [n, v] : table)
    if (v == value) return std::string(n);
  return "unknown";
}

constexpr Table<SplitMode, 3> kSplit{
    {{"auto", SplitMode::automatic}, {"single", SplitMode::single_pass}, {"split", SplitMode::split}}};
constexpr Table<DecodeKernel, 4> kDecodeKernel{{{"auto", DecodeKernel::automatic},
                                                {"scalar", DecodeKernel::scalar},
                                                {"matrix", DecodeKernel::matrix},
                                                {"matrix_khr", DecodeKernel::matrix_khr}}};
constexpr Table<AttentionKernel, 4> kAttentionKernel{{{"auto", AttentionKernel::automatic},
                                                      {"decode", AttentionKernel::decode},
                                                      {"scalar", AttentionKernel::scalar},
                                                      {"matrix", AttentionKernel::matrix}}};
constexpr Table<DecodeOrder, 3> kOrder{
    {{"auto", DecodeOrder::automatic}, {"grid", DecodeOrder::grid}, {"longest_first", DecodeOrder::longest_first}}};
constexpr Table<DecodeMerge, 2> kMerge{
    {{"reduce_pass", DecodeMerge::reduce_pass}, {"in_dispatch", DecodeMerge::in_dispatch}}};
constexpr Table<KvLayout, 3> kLayout{{{"vllm", KvLayout::vllm}, {"nhd", KvLayout::nhd}, {"hnd", KvLayout::hnd}}};
constexpr Table<RotaryStyle, 2> kRotary{{{"neox", RotaryStyle::neox}, {"gptj", RotaryStyle::gptj}}};
constexpr Table<AdmissionStatus, 3> kAdmission{
    {{"ok", AdmissionStatus::ok}, {"later", AdmissionStatus::later}, {"never", AdmissionStatus::never}}};
constexpr Table<MemorySource, 3> kSource{{{"none", MemorySource::none},
                                          {"heap_size", MemorySource::heap_size},
                                          {"memory_budget", MemorySource::memory_budget}}};
constexpr Table<KvCacheKind, 3> kKind{{{"key_value", KvCacheKind::key_value},
                                       {"mla_one_pool", KvCacheKind::mla_one_pool},
                                       {"mla_two_pools", KvCacheKind::mla_two_pools}}};
constexpr Table<MlaCacheForm, 2> kForm{
    {{"one_pool", MlaCacheForm::one_pool}, {"two_pools", MlaCacheForm::two_pools}}};
constexpr Table<DType, 9> kDType{{{"f32", DType::f32},
                                  {"f16", DType::f16},
                                  {"bf16", DType::bf16},
                                  {"fp8_e4m3", DType::fp8_e4m3},
                                  {"fp8_e5m2", DType::fp8_e5m2},
                                  {"i32", DType::i32},
                                  {"u32", DType::u32},
                                  {"i64", DType::i64},
                                  {"u8", DType::u8}}};

}  // namespace

DType parse_dtype_arg(std::string_view argument, std::string_view n) { return parse(kDType, argument, n); }
KvLayout parse_layout_arg(std::string_view argument, std::string_view n) { return parse(kLayout, argument, n); }
RotaryStyle parse_rotary_style_arg(std::string_view argument, std::string_view n) {
  return parse(kRotary, argument, n);
}
SplitMode parse_split_arg(std::string_view argument, std::string_view n) { return parse(kSplit, argument, n); }
DecodeKernel parse_decode_kernel_arg(std::string_view argument, std::string_view n) {
  return parse(kDecodeKernel, argument, n);
}
AttentionKernel parse_attention_kernel_arg(std::string_view argument, std::string_view n) {
  return parse(kAttentionKernel, argument, n);
}
DecodeOrder parse_decode_order_arg(std::string_view argument, std::string_view n) { return parse(kOrder, argument, n); }
DecodeMerge parse_decode_merge_arg(std::string_view argument, std::string_view n) { return parse(kMerge, argument, n); }
KvCacheKind parse_kv_cache_kind_arg(std::string_view argument, std::string_view n) { return parse(kKind, argument, n); }
MlaCacheForm parse_mla_cache_form_arg(std::string_view argument, std::string_view n) {
  return parse(kForm, argument, n);
}

std::string name_of(DType dtype) { return name(kDType, dtype); }
std::string name_of(KvLayout layout) { return name(kLayout, layout); }
std::string name_of(RotaryStyle style) { return name(kRotary, style); }
std::string name_of(SplitMode split) { return name(kSplit, split); }
std::string name_of(DecodeKernel kernel) { return name(kDecodeKernel, kernel); }
std::string name_of(AttentionKernel kernel) { return name(kAttentionKernel, kernel); }
std::string name_of(DecodeOrder order) { return name(kOrder, order); }
std::string name_of(DecodeMerge merge) { return name(kMerge, merge); }
std::string name_of(AdmissionStatus status) { return name(kAdmission, status); }
std::string name_of(MemorySource source) { return name(kSource, source); }
std::string name_of(KvCacheKind kind) { return name(kKind, kind); }
std::string name_of(MlaCacheForm form) { return name(kForm, form); }

}  // namespace vkpaged::python
