// SPDX-License-Identifier: Apache-2.0
#include "attend_inputs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <utility>

#include "decode_option_names.hpp"
#include "npy.hpp"
#include "ops/scale_validation.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::cli {

namespace {

[[noreturn]] void refuse(const std::string& message) { throw Error(ErrorCode::invalid_argument, message); }

// Reads one file, prefixing any error with the option it came from.
HostTensor read_input(const char* option, const std::string& path, bool u2_is_bf16) {
  try {
    return read_npy(path, NpyReadOptions{u2_is_bf16});
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: {}", option, e.what()));
  }
}

DType parse_cache_dtype(const std::string& kv_dtype, DType query_dtype) {
  if (kv_dtype == "auto") return query_dtype;
  if (kv_dtype == "fp8_e4m3") return DType::fp8_e4m3;
  if (kv_dtype == "fp8_e5m2") return DType::fp8_e5m2;
  refuse(fmt::format("--kv-dtype: '{}' is not auto, fp8_e4m3 or fp8_e5m2", kv_dtype));
}

SplitMode parse_split(const std::string& split) {
  if (const auto mode = split_mode_named(split)) return *mode;
  refuse(fmt::format("--split: '{}' is not auto, single or split", split));
}

DecodeKernel parse_kernel(const std::string& kernel) {
  if (const auto k = decode_kernel_named(kernel)) return *k;
  refuse(fmt::format("--kernel: '{}' is not auto, scalar, matrix or matrix-khr", kernel));
}

AttentionKernel parse_attention_kernel(const std::string& kernel) {
  if (kernel == "auto") return AttentionKernel::automatic;
  if (kernel == "scalar") return AttentionKernel::scalar;
  if (kernel == "matrix") return AttentionKernel::matrix;
  refuse(fmt::format("--kernel: '{}' is not auto, scalar or matrix", kernel));
}

KvLayout parse_layout(const std::string& name) {
  if (const auto layout = parse_kv_layout(name)) return *layout;
  refuse(fmt::format("--kv-layout: '{}' is not vllm, nhd or hnd", name));
}

void check_finite(const char* option, float value) {
  if (!std::isfinite(value)) refuse(fmt::format("{}: {} is not a finite number", option, value));
}

// One page-table form, complete: --block-tables and --context-lens, or --kv-indptr,
// --kv-indices and --kv-last-page-len. Checked before any file is read.
void check_page_table_options(const AttendArgs& a) {
  constexpr const char* kForms =
      "the page tables are --block-tables and --context-lens, or --kv-indptr, --kv-indices and --kv-last-page-len";
  const std::pair<const char*, const std::string*> csr[] = {
      {"--kv-indptr", &a.kv_indptr}, {"--kv-indices", &a.kv_indices}, {"--kv-last-page-len", &a.kv_last_page_len}};
  const auto given = std::find_if(std::begin(csr), std::end(csr), [](const auto& o) { return !o.second->empty(); });
  if (given == std::end(csr)) {
    if (a.block_tables.empty()) refuse(fmt::format("--block-tables: not given ({})", kForms));
    if (a.context_lens.empty()) refuse(fmt::format("--context-lens: not given ({})", kForms));
    return;
  }
  for (const auto& [option, value] : {std::pair{"--block-tables", &a.block_tables}, std::pair{"--context-lens", &a.context_lens}})
    if (!value->empty())
      refuse(fmt::format("{}: {} given with {} {}: {}", option, *value, given->first, *given->second, kForms));
  for (const auto& [option, value] : csr)
    if (value->empty())
      refuse(fmt::format("{}: not given, but {} {} is ({})", option, given->first, *given->second, kForms));
}

// The cache options, one form complete: --key-cache and --value-cache, or MLA's --mla-cache
// (with --value-head-size), or --ckv-cache and --kpe-cache. Returns whether the call is MLA.
bool check_cache_options(const AttendArgs& a) {
  constexpr const char* kForms =
      "the caches are --key-cache and --value-cache, or for MLA --mla-cache with --value-head-size, or --ckv-cache "
      "and --kpe-cache";
  const bool one = !a.mla_cache.empty(), two = !a.ckv_cache.empty() || !a.kpe_cache.empty();
  if (!one && !two) {
    if (a.key_cache.empty()) refuse(fmt::format("--key-cache: not given ({})", kForms));
    if (a.value_cache.empty()) refuse(fmt::format("--value-cache: not given ({})", kForms));
    if (a.value_head_size != 0)
      refuse(fmt::format("--value-head-size: {} given without an MLA cache ({})", a.value_head_size, kForms));
    return false;
  }
  const char* mla_option = one ? "--mla-cache" : !a.ckv_cache.empty() ? "--ckv-cache" : "--kpe-cache";
  if (!a.key_cache.empty()) refuse(fmt::format("--key-cache: given with {} ({})", mla_option, kForms));
  if (!a.value_cache.empty()) refuse(fmt::format("--value-cache: given with {} ({})", mla_option, kForms));
  if (one && two) refuse(fmt::format("{}: given with --mla-cache ({})", a.ckv_cache.empty() ? "--kpe-cache" : "--ckv-cache", kForms));
  if (one && a.value_head_size == 0) refuse("--value-head-size: not given (--mla-cache needs Dv, the value's width)");
  if (two && a.ckv_cache.empty()) refuse(fmt::format("--ckv-cache: not given, but --kpe-cache is ({})", kForms));
  if (two && a.kpe_cache.empty()) refuse(fmt::format("--kpe-cache: not given, but --ckv-cache is ({})", kForms));
  if (a.kv_layout == "hnd")
    refuse("--kv-layout: hnd with an MLA cache (its rows are nhd's with one kv head: give nhd or leave it out)");
  return true;
}

// The query starts: --query-starts, or 0, 1, ..., S (one token per request) without it.
HostTensor query_starts_of(const AttendArgs& a, const HostTensor& block_tables, const HostTensor& kv_indptr) {
  if (!a.query_starts.empty()) return read_input("--query-starts", a.query_starts, false);
  // S: the block table's rows, or kv_indptr's entries - 1 (bad shapes are refused later, by name).
  int64_t S = block_tables.shape().rank() == 2 ? block_tables.shape()[0] : 0;
  if (!kv_indptr.empty()) S = kv_indptr.shape().rank() == 1 ? std::max<int64_t>(kv_indptr.shape()[0] - 1, 0) : 0;
  HostTensor starts(DType::i32, Shape{S + 1});
  for (int64_t i = 0; i <= S; ++i) starts.as<int32_t>()[i] = int32_t(i);
  return starts;
}

// What multi-query attention and MLA read alike from the decode inputs read so far: the query,
// the page tables, ALiBi and sinks, the query starts (0, 1, ..., S without --query-starts) and the
// tree mask.
template <typename Inputs>
void move_request_inputs(const AttendArgs& a, AttendCall& call, Inputs& m) {
  auto& in = call.inputs;
  m.query_starts = query_starts_of(a, in.block_tables, in.kv_indptr);
  if (!a.tree_mask.empty()) m.tree_mask = read_input("--tree-mask", a.tree_mask, false);
  m.query = std::move(in.query);
  m.block_tables = std::move(in.block_tables);
  m.context_lens = std::move(in.context_lens);
  m.kv_indptr = std::move(in.kv_indptr);
  m.kv_indices = std::move(in.kv_indices);
  m.kv_last_page_len = std::move(in.kv_last_page_len);
  m.alibi_slopes = std::move(in.alibi_slopes);
  m.sinks = std::move(in.sinks);
  m.cache_dtype = in.cache_dtype;
  m.sliding_window = call.options.sliding_window;
}

// The decode inputs read so far as MLA's: the caches read here, every request field moved.
void move_to_mla(const AttendArgs& a, AttendCall& call) {
  auto& in = call.inputs;
  auto& m = call.mla_inputs;
  const bool cache_bf16 = in.cache_dtype == DType::bf16;
  if (!a.mla_cache.empty()) {
    m.mla_cache = read_input("--mla-cache", a.mla_cache, cache_bf16);
  } else {
    m.ckv_cache = read_input("--ckv-cache", a.ckv_cache, cache_bf16);
    m.kpe_cache = read_input("--kpe-cache", a.kpe_cache, cache_bf16);
  }
  m.value_head_size = a.value_head_size;
  move_request_inputs(a, call, m);
}

// The decode inputs read so far, with the query starts (0, 1, ..., S without --query-starts)
// and the tree mask, as multi-query attention's.
void move_to_attention(const AttendArgs& a, KvLayout layout, AttendCall& call) {
  auto& in = call.inputs;
  auto& m = call.attention;
  m.key_cache = std::move(in.key_cache);
  m.value_cache = std::move(in.value_cache);
  m.kv_layout = layout;
  move_request_inputs(a, call, m);
}

}  // namespace

AttendCall load_attend_call(const AttendArgs& a) {
  if (a.dtype != "auto" && a.dtype != "f32" && a.dtype != "f16" && a.dtype != "bf16")
    refuse(fmt::format("--dtype: '{}' is not auto, f32, f16 or bf16", a.dtype));
  // Refuses a bad value before any file is read; only fp8 caches (never `auto`) bound the scales further.
  const DType scales_cache = parse_cache_dtype(a.kv_dtype, DType::f32);
  const KvLayout layout = parse_layout(a.kv_layout);
  if (!a.tree_mask.empty() && a.query_starts.empty())
    refuse("--tree-mask: needs --query-starts (a tree mask holds each request's q_s x q_s matrix)");
  check_page_table_options(a);
  AttendCall call;
  call.mla = check_cache_options(a);
  call.multi_query = !call.mla && (!a.query_starts.empty() || layout != KvLayout::vllm);
  call.want_lse = !a.lse.empty();
  if (call.mla) {
    call.mla_options.split = parse_split(a.split);
    call.mla_options.partition_tokens = a.partition_tokens;
    call.mla_options.kernel = parse_attention_kernel(a.kernel);  // MLA's kernels: auto, scalar or matrix
  }
  if (call.multi_query) {
    call.attention_options.kernel = parse_attention_kernel(a.kernel);
    call.attention_options.split = parse_split(a.split);
    call.attention_options.partition_tokens = a.partition_tokens;
  }
  call.options.split = parse_split(a.split);
  call.options.partition_tokens = a.partition_tokens;
  if (!call.mla) call.options.kernel = parse_kernel(a.kernel);
  if (a.scale) {
    detail::check_scale("--scale", *a.scale);  // the library's rule (docs/contract.md, "Scales")
    call.params.scale = *a.scale;
  }
  check_finite("--softcap", a.softcap);
  if (a.softcap < 0.0f) refuse(fmt::format("--softcap: {} must be >= 0 (0 = off)", a.softcap));
  call.params.softcap = a.softcap;
  call.options.sliding_window = a.sliding_window;
  detail::check_scale("--k-scale", a.k_scale, scales_cache);
  detail::check_scale("--v-scale", a.v_scale, scales_cache);
  call.params.k_scale = a.k_scale;
  call.params.v_scale = a.v_scale;

  const bool bf16 = a.dtype == "bf16";
  auto& in = call.inputs;
  in.query = read_input("--query", a.query, bf16);
  const DType q = in.query.dtype();
  if (!is_float_dtype(q))
    refuse(fmt::format("--query: {}: dtype {} is not f32 (<f4), f16 (<f2) or bf16 (<u2 with --dtype bf16)", a.query,
                       dtype_name(q)));
  if (a.dtype != "auto" && a.dtype != dtype_name(q))
    refuse(fmt::format("--dtype: {} given, but {} holds {}", a.dtype, a.query, dtype_name(q)));
  in.cache_dtype = parse_cache_dtype(a.kv_dtype, q);
  // Caches in the query's dtype follow --dtype; fp8 caches are |u1 bytes either way.
  const bool cache_bf16 = in.cache_dtype == DType::bf16;
  if (!call.mla) {
    in.key_cache = read_input("--key-cache", a.key_cache, cache_bf16);
    in.value_cache = read_input("--value-cache", a.value_cache, cache_bf16);
  }
  if (a.kv_indptr.empty()) {
    in.block_tables = read_input("--block-tables", a.block_tables, false);
    in.context_lens = read_input("--context-lens", a.context_lens, false);
  } else {
    in.kv_indptr = read_input("--kv-indptr", a.kv_indptr, false);
    in.kv_indices = read_input("--kv-indices", a.kv_indices, false);
    in.kv_last_page_len = read_input("--kv-last-page-len", a.kv_last_page_len, false);
  }
  if (!a.alibi_slopes.empty()) in.alibi_slopes = read_input("--alibi-slopes", a.alibi_slopes, false);
  if (!a.sinks.empty()) in.sinks = read_input("--sinks", a.sinks, false);
  if (call.mla) move_to_mla(a, call);
  if (call.multi_query) move_to_attention(a, layout, call);
  return call;
}

std::string blame_option(const std::string& message, bool csr) {
  // Library argument names (the text before the first ':' or '[') -> the option holding them.
  static const std::pair<const char*, const char*> kOptions[] = {
      {"query", "--query"},
      {"key_cache", "--key-cache"},
      {"value_cache", "--value-cache"},
      {"block_tables", "--block-tables"},
      {"context_lens", "--context-lens"},
      {"max_context_len", "--context-lens"},
      {"max_blocks_per_seq", "--block-tables"},
      {"alibi_slopes", "--alibi-slopes"},
      {"sinks", "--sinks"},
      {"num_heads", "--query"},
      {"num_kv_heads", "--key-cache"},
      {"head_size", "--query"},
      {"block_size", "--key-cache"},
      {"num_blocks", "--key-cache"},
      {"kv_dtype", "--kv-dtype"},
      {"scale", "--scale"},
      {"softcap", "--softcap"},
      {"sliding_window", "--sliding-window"},
      {"k_scale", "--k-scale"},
      {"v_scale", "--v-scale"},
      {"partition_tokens", "--partition-tokens"},
      {"split", "--split"},
      {"kernel", "--kernel"},
      {"device", "--device"},
      {"query_starts", "--query-starts"},
      {"num_query_tokens", "--query"},
      {"tree_mask", "--tree-mask"},
      {"kv_layout", "--kv-layout"},
      {"kv_indptr", "--kv-indptr"},
      {"kv_indices", "--kv-indices"},
      {"kv_last_page_len", "--kv-last-page-len"},
      {"mla_cache", "--mla-cache"},
      {"ckv_cache", "--ckv-cache"},
      {"kpe_cache", "--kpe-cache"},
      {"value_head_size", "--value-head-size"},
  };
  const std::string name = message.substr(0, message.find_first_of(":[ "));
  // M comes from the CSR form's pages when there is no block table.
  if (csr && name == "max_blocks_per_seq") return fmt::format("--kv-indptr: {}", message);
  for (const auto& [argument, option] : kOptions)
    if (name == argument) return fmt::format("{}: {}", option, message);
  return message;
}

}  // namespace vkpaged::cli
