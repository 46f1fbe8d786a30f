#include "attend_inputs.hpp"

#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "decode_option_names.hpp"
#include "npy.hpp"
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
  refuse(fmt::format("--kernel: '{}' is not auto, scalar or matrix", kernel));
}

void check_finite(const char* option, float value) {
  if (!std::isfinite(value)) refuse(fmt::format("{}: {} is not a finite number", option, value));
}

}  // namespace

AttendCall load_attend_call(const AttendArgs& a) {
  if (a.dtype != "auto" && a.dtype != "f32" && a.dtype != "f16" && a.dtype != "bf16")
    refuse(fmt::format("--dtype: '{}' is not auto, f32, f16 or bf16", a.dtype));
  (void)parse_cache_dtype(a.kv_dtype, DType::f32);  // refuses a bad value before any file is read
  AttendCall call;
  call.options.split = parse_split(a.split);
  call.options.partition_tokens = a.partition_tokens;
  call.options.kernel = parse_kernel(a.kernel);
  if (a.scale) {
    check_finite("--scale", *a.scale);
    call.params.scale = *a.scale;
  }
  check_finite("--softcap", a.softcap);
  if (a.softcap < 0.0f) refuse(fmt::format("--softcap: {} must be >= 0 (0 = off)", a.softcap));
  call.params.softcap = a.softcap;
  call.options.sliding_window = a.sliding_window;
  check_finite("--k-scale", a.k_scale);
  check_finite("--v-scale", a.v_scale);
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
  in.key_cache = read_input("--key-cache", a.key_cache, cache_bf16);
  in.value_cache = read_input("--value-cache", a.value_cache, cache_bf16);
  in.block_tables = read_input("--block-tables", a.block_tables, false);
  in.context_lens = read_input("--context-lens", a.context_lens, false);
  if (!a.alibi_slopes.empty()) in.alibi_slopes = read_input("--alibi-slopes", a.alibi_slopes, false);
  if (!a.sinks.empty()) in.sinks = read_input("--sinks", a.sinks, false);
  return call;
}

std::string blame_option(const std::string& message) {
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
  };
  const std::string name = message.substr(0, message.find_first_of(":[ "));
  for (const auto& [argument, option] : kOptions)
    if (name == argument) return fmt::format("{}: {}", option, message);
  return message;
}

}  // namespace vkpaged::cli
