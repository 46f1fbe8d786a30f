// SPDX-License-Identifier: Apache-2.0
// The benchmark suites: `standard` is the table of docs/performance-targets.md.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bench.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::cli {

namespace {

BenchCase make(std::string name, uint32_t batch, uint32_t context, uint32_t heads, uint32_t kv_heads, uint32_t head_size) {
  BenchCase c;
  c.name = std::move(name);
  c.batch = batch;
  c.context = context;
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.head_size = head_size;
  return c;
}

std::vector<BenchCase> standard() {
  return {make("long1", 1, 32768, 32, 8, 128),   make("mid8", 8, 4096, 32, 8, 128),
          make("batch64", 64, 4096, 32, 8, 128), make("batch256", 256, 1024, 32, 8, 128),
          make("mha32", 32, 8192, 32, 32, 128),  make("gqa8x", 16, 2048, 64, 8, 128),
          make("d64", 4, 16384, 32, 8, 64)};
}

std::vector<BenchCase> ragged() {
  std::vector<BenchCase> cases;
  for (auto c : standard()) {
    if (c.name != "batch64" && c.name != "batch256" && c.name != "mha32") continue;
    c.name += "-ragged";
    c.ragged = true;
    cases.push_back(c);
  }
  // Target 5 asks D 64 too: batch64's 1 GB at full lengths, with half the head size.
  BenchCase d64 = make("batch128-d64-ragged", 128, 4096, 32, 8, 64);
  d64.ragged = true;
  cases.push_back(d64);
  return cases;
}

std::vector<BenchCase> dtypes() {
  std::vector<BenchCase> cases;
  const std::pair<DType, DType> pairs[] = {{DType::f32, DType::f32},
                                           {DType::f16, DType::f16},
                                           {DType::bf16, DType::bf16},
                                           {DType::f16, DType::fp8_e4m3},
                                           {DType::f16, DType::fp8_e5m2}};
  for (const char* base : {"batch64", "batch256"})
    for (auto [q, kv] : pairs) {
      BenchCase c = make(base, base[5] == '6' ? 64 : 256, base[5] == '6' ? 4096 : 1024, 32, 8, 128);
      c.query_dtype = q;
      c.cache_dtype = kv;
      c.name = fmt::format("{}-{}", base, dtype_name(kv));
      cases.push_back(c);
    }
  return cases;
}

std::vector<BenchCase> blocks() {
  std::vector<BenchCase> cases;
  for (uint32_t b : {8u, 16u, 32u, 64u, 128u}) {
    BenchCase c = make(fmt::format("batch64-b{}", b), 64, 4096, 32, 8, 128);
    c.block_size = b;
    cases.push_back(c);
  }
  return cases;
}

std::vector<BenchCase> long_contexts() {
  return {make("1x32k", 1, 32768, 32, 8, 128), make("1x128k", 1, 131072, 32, 8, 128),
          make("1x256k", 1, 262144, 32, 8, 128), make("2x128k", 2, 131072, 32, 8, 128),
          make("4x64k", 4, 65536, 32, 8, 128), make("4x256k", 4, 262144, 32, 8, 128)};
}

// The same 1 GB of f16 KV (GQA 32/8, D 128) as 16 sequences of 16384 tokens down to 1024 of
// 256: what a workgroup's start and end cost, since each (sequence, kv head) is at least one.
std::vector<BenchCase> lengths() {
  std::vector<BenchCase> cases;
  for (uint32_t batch = 16; batch <= 1024; batch *= 2)
    cases.push_back(make(fmt::format("b{}x{}", batch, 262144 / batch), batch, 262144 / batch, 32, 8, 128));
  return cases;
}

// Every GQA group size over the same 134 MB of f16 KV (D 128, 2048 tokens), the last MQA: each
// should read its KV once per step, whatever the group (performance-targets.md, target 3).
std::vector<BenchCase> groups() {
  return {make("group1", 4, 2048, 32, 32, 128),  make("group2", 8, 2048, 32, 16, 128),
          make("group4", 16, 2048, 32, 8, 128),  make("group7", 32, 2048, 28, 4, 128),
          make("group8", 16, 2048, 64, 8, 128),  make("group16", 64, 2048, 32, 2, 128),
          make("group32", 128, 2048, 32, 1, 128)};
}

// One short sequence, single-user chat, where latency is all (performance-targets.md, target 4).
std::vector<BenchCase> latency() {
  return {make("one512", 1, 512, 32, 8, 128), make("one2048", 1, 2048, 32, 8, 128),
          make("one8192", 1, 8192, 32, 8, 128), make("four2048", 4, 2048, 32, 8, 128)};
}

// Small enough for lavapipe on two CPU cores.
std::vector<BenchCase> quick() {
  std::vector<BenchCase> cases{make("q-long", 1, 4096, 8, 2, 128), make("q-batch", 16, 512, 8, 2, 128),
                               make("q-mha", 8, 512, 8, 8, 64)};
  BenchCase ragged = make("q-ragged", 16, 1024, 8, 2, 128);
  ragged.ragged = true;
  cases.push_back(ragged);
  return cases;
}

}  // namespace

std::vector<BenchCase> bench_suite(const std::string& name) {
  if (name == "standard") return standard();
  if (name == "ragged") return ragged();
  if (name == "dtypes") return dtypes();
  if (name == "blocks") return blocks();
  if (name == "long") return long_contexts();
  if (name == "lengths") return lengths();
  if (name == "groups") return groups();
  if (name == "latency") return latency();
  if (name == "quick") return quick();
  if (name == "all") {
    std::vector<BenchCase> all;
    for (const auto& s : bench_suite_names(name)) {
      auto part = bench_suite(s);
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  }
  throw Error(ErrorCode::invalid_argument,
              fmt::format("--suite: unknown suite \"{}\" (standard, ragged, dtypes, blocks, long, lengths, groups, latency, quick, all; cache-write, cache-write-quick; prefill, prefill-quick; {})", name, fmt::join(mla_suite_names(), ", ")));
}

std::vector<std::string> bench_suite_names(const std::string& name) {
  if (name == "all") return {"standard", "ragged", "dtypes", "blocks", "long", "lengths", "groups", "latency"};
  bench_suite(name);  // refuses an unknown name
  return {name};
}

std::vector<BenchCase> with_cache_dtype(std::vector<BenchCase> cases, const std::string& cache_dtype) {
  if (cache_dtype.empty()) return cases;
  const auto dtype = parse_dtype(cache_dtype);
  if (!dtype || !(is_float_dtype(*dtype) || is_fp8_dtype(*dtype)))
    throw Error(ErrorCode::invalid_argument,
                fmt::format("--cache-dtype: \"{}\" is not a cache dtype (f32, f16, bf16, fp8_e4m3, fp8_e5m2)", cache_dtype));
  for (auto& c : cases) {
    if (c.cache_dtype == *dtype) continue;
    c.cache_dtype = *dtype;
    // A float cache holds the query's dtype (the contract); an fp8 one takes an f16 query.
    c.query_dtype = is_fp8_dtype(*dtype) ? DType::f16 : *dtype;
    c.name += "-" + std::string(dtype_name(*dtype));
  }
  return cases;
}

std::vector<BenchCase> with_kv_layout(std::vector<BenchCase> cases, const std::string& kv_layout) {
  if (kv_layout.empty()) return cases;
  const auto layout = parse_kv_layout(kv_layout);
  if (!layout)
    throw Error(ErrorCode::invalid_argument, fmt::format("--kv-layout: \"{}\" is not vllm, nhd or hnd", kv_layout));
  for (auto& c : cases) {
    c.kv_layout = *layout;
    if (*layout != KvLayout::vllm) c.name += "-" + std::string(kv_layout_name(*layout));
  }
  return cases;
}

}  // namespace vkpaged::cli
