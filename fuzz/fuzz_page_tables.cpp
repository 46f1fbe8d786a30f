// SPDX-License-Identifier: Apache-2.0
// FlashInfer's CSR page tables (kv_indptr, kv_indices, kv_last_page_len, max_blocks_per_seq)
// built from the bytes, mostly valid and then mutated, over small valid queries and caches.
// The target judges each table by the contract on its own (docs/contract.md: kv_indptr 0 first,
// nondecreasing, ending at kv_indices' length; block ids in [0, N); the last page's length in
// [1, B] with pages and 0 without; no more than M pages) and requires:
// - decode_shape_of and attention_shape_of (single tokens, each request needing a page) accept
//   exactly the tables the contract accepts, refusing the rest with vkpaged::Error;
// - an accepted table's shape says csr_page_table, its M and its longest length;
// - reference::decode_attention on it gives, bit for bit, what it gives on the dense form the
//   target writes itself from the same blocks and lengths.
#include <algorithm>
#include <climits>
#include <cstring>
#include <random>

#include "fuzz_support.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::fuzz {
namespace {

constexpr int64_t H = 2, Hkv = 1, D = 32;

void put(HostTensor& t, int64_t i, int64_t v) {
  switch (t.dtype()) {
    case DType::i32: t.as<int32_t>()[i] = int32_t(v); break;
    case DType::u32: t.as<uint32_t>()[i] = uint32_t(v); break;
    default: t.as<int64_t>()[i] = v; break;
  }
}

// The value the library reads: i32 and i64 as signed, u32 as unsigned.
int64_t get(const HostTensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::i32: return t.as<int32_t>()[i];
    case DType::u32: return t.as<uint32_t>()[i];
    default: return t.as<int64_t>()[i];
  }
}

// A value, mostly `usual`, sometimes just off it or anything.
int64_t pick_value(FuzzedDataProvider& p, int64_t usual, bool mutating) {
  if (!mutating) return usual;
  switch (p.ConsumeIntegralInRange<int>(0, 15)) {
    case 0: return usual + 1;
    case 1: return usual - 1;
    case 2: return 0;
    case 3: return -1;
    case 4: return p.ConsumeIntegral<int32_t>();
    case 5: return int64_t(1) << p.ConsumeIntegralInRange<int>(31, 40);
    default: return usual;
  }
}

struct Verdict {
  bool valid = true;
  uint32_t max_blocks_per_seq = 0;
  std::vector<int64_t> tables;  // [S * M]
  std::vector<int64_t> lens;
};

// The contract's judgement of the tables, and their dense form where they pass.
Verdict judge(const HostTensor& indptr, const HostTensor& indices, const HostTensor& last, int64_t S, int64_t B,
              int64_t N, uint32_t given_m) {
  Verdict v;
  const int64_t nnz = indices.shape()[0];
  if (indptr.shape()[0] != S + 1 || last.shape()[0] != S || get(indptr, 0) != 0) return {false};
  int64_t most = 0;
  for (int64_t s = 0; s < S; ++s) {
    const int64_t a = get(indptr, s), b = get(indptr, s + 1);
    if (b < a || b > nnz) return {false};
    most = std::max(most, b - a);
  }
  if (get(indptr, S) != nnz) return {false};
  v.max_blocks_per_seq = given_m != 0 ? given_m : uint32_t(std::max<int64_t>(most, 1));
  if (most > int64_t(v.max_blocks_per_seq) || int64_t(v.max_blocks_per_seq) * B > INT32_MAX) return {false};
  v.tables.assign(size_t(S) * v.max_blocks_per_seq, 0);
  for (int64_t s = 0; s < S; ++s) {
    const int64_t a = get(indptr, s), pages = get(indptr, s + 1) - a, l = get(last, s);
    if (pages == 0 ? l != 0 : (l < 1 || l > B)) return {false};
    for (int64_t j = 0; j < pages; ++j) {
      const int64_t id = get(indices, a + j);
      if (id < 0 || id >= N) return {false};
      v.tables[size_t(s) * v.max_blocks_per_seq + size_t(j)] = id;
    }
    v.lens.push_back(pages == 0 ? 0 : (pages - 1) * B + l);
  }
  return v;
}

bool same_bytes(const HostTensor& a, const HostTensor& b) {
  return a.bytes() == b.bytes() && (a.bytes() == 0 || std::memcmp(a.data(), b.data(), a.bytes()) == 0);
}

template <typename F>
bool accepted(F&& call) {
  try {
    call();
    return true;
  } catch (const Error& e) {
    FUZZ_CHECK(e.code() == ErrorCode::invalid_argument, std::string("not invalid_argument: ") + e.what());
    return false;
  }
}

int run(FuzzedDataProvider& p) {
  static constexpr int64_t kBlockSizes[] = {1, 2, 4, 8, 16};
  static constexpr DType kIndexDtypes[] = {DType::i32, DType::u32, DType::i64};
  const int64_t S = p.ConsumeIntegralInRange<int64_t>(0, 4);
  const int64_t B = kBlockSizes[p.ConsumeIntegralInRange<size_t>(0, std::size(kBlockSizes) - 1)];
  const int64_t N = p.ConsumeIntegralInRange<int64_t>(1, 6);
  const bool mutating = p.ConsumeIntegralInRange<int>(0, 2) == 0;
  const uint32_t given_m = p.ConsumeBool() ? 0u : p.ConsumeIntegralInRange<uint32_t>(0, 6);

  // A valid table first: each request's pages and last page, ids anywhere in the cache.
  std::vector<int64_t> pages(static_cast<size_t>(S));
  int64_t nnz = 0;
  for (auto& n : pages) nnz += (n = p.ConsumeIntegralInRange<int64_t>(0, 4));
  const int64_t indptr_len = mutating && p.ConsumeIntegralInRange<int>(0, 7) == 0 ? p.ConsumeIntegralInRange<int64_t>(0, 6) : S + 1;
  const int64_t last_len = mutating && p.ConsumeIntegralInRange<int>(0, 7) == 0 ? p.ConsumeIntegralInRange<int64_t>(0, 6) : S;
  const int64_t indices_len = std::max<int64_t>(0, mutating && p.ConsumeIntegralInRange<int>(0, 7) == 0 ? nnz + p.ConsumeIntegralInRange<int64_t>(-2, 2) : nnz);
  DecodeInputs in;
  in.kv_indptr = HostTensor(kIndexDtypes[p.ConsumeIntegralInRange<size_t>(0, 2)], Shape{indptr_len});
  in.kv_indices = HostTensor(kIndexDtypes[p.ConsumeIntegralInRange<size_t>(0, 2)], Shape{indices_len});
  in.kv_last_page_len = HostTensor(kIndexDtypes[p.ConsumeIntegralInRange<size_t>(0, 2)], Shape{last_len});
  in.max_blocks_per_seq = given_m;
  int64_t at = 0;
  for (int64_t i = 0; i < indptr_len; ++i) {
    put(in.kv_indptr, i, pick_value(p, at, mutating));
    if (i < S) at += pages[size_t(i)];
  }
  for (int64_t i = 0; i < indices_len; ++i) put(in.kv_indices, i, pick_value(p, p.ConsumeIntegralInRange<int64_t>(0, N - 1), mutating));
  for (int64_t s = 0; s < last_len; ++s) {
    const int64_t n = s < S ? pages[size_t(s)] : 0;
    put(in.kv_last_page_len, s, pick_value(p, n == 0 ? 0 : p.ConsumeIntegralInRange<int64_t>(1, B), mutating));
  }

  std::minstd_rand rng(p.ConsumeIntegral<uint32_t>());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  in.cache_dtype = DType::f32;
  in.query = HostTensor(DType::f32, Shape{S, H, D});
  in.key_cache = HostTensor(DType::f32, Shape{N, Hkv, D / 4, B, 4});
  in.value_cache = HostTensor(DType::f32, Shape{N, Hkv, D, B});
  for (HostTensor* t : {&in.query, &in.key_cache, &in.value_cache})
    for (int64_t i = 0; i < t->numel(); ++i) t->set(size_t(i), u(rng));

  const bool shapes_fit = indptr_len >= 1 && last_len == indptr_len - 1;
  const Verdict verdict =
      shapes_fit ? judge(in.kv_indptr, in.kv_indices, in.kv_last_page_len, S, B, N, given_m) : Verdict{false};
  DecodeShape shape;
  const bool decode_ok = accepted([&] { shape = decode_shape_of(in); });
  FUZZ_CHECK(decode_ok == verdict.valid, std::string("decode_shape_of ") + (decode_ok ? "accepted" : "refused") +
                                             " tables the contract " + (verdict.valid ? "accepts" : "refuses"));
  // Single tokens: each request must hold its new token, so needs a page.
  const bool every_request_has_a_page =
      std::all_of(verdict.lens.begin(), verdict.lens.end(), [](int64_t len) { return len >= 1; });
  AttentionInputs a;
  a.query = in.query;
  a.key_cache = in.key_cache;
  a.value_cache = in.value_cache;
  a.cache_dtype = in.cache_dtype;
  a.kv_indptr = in.kv_indptr;
  a.kv_indices = in.kv_indices;
  a.kv_last_page_len = in.kv_last_page_len;
  a.max_blocks_per_seq = given_m;
  a.query_starts = HostTensor(DType::i32, Shape{std::max<int64_t>(indptr_len, 1)});
  for (int64_t i = 0; i < a.query_starts.numel(); ++i) a.query_starts.as<int32_t>()[i] = int32_t(i);
  const bool attention_ok = accepted([&] { attention_shape_of(a); });
  FUZZ_CHECK(attention_ok == (verdict.valid && every_request_has_a_page),
             std::string("attention_shape_of ") + (attention_ok ? "accepted" : "refused") + " single tokens");
  if (!verdict.valid) return 0;

  FUZZ_CHECK(shape.csr_page_table, "an accepted CSR table's shape says csr_page_table");
  FUZZ_CHECK(shape.max_blocks_per_seq == verdict.max_blocks_per_seq,
             "M " + std::to_string(shape.max_blocks_per_seq) + ", the contract's " + std::to_string(verdict.max_blocks_per_seq));
  const int64_t longest = verdict.lens.empty() ? 0 : *std::max_element(verdict.lens.begin(), verdict.lens.end());
  FUZZ_CHECK(int64_t(shape.max_context_len) == longest, "max_context_len " + std::to_string(shape.max_context_len));

  DecodeInputs dense = in;
  dense.kv_indptr = dense.kv_indices = dense.kv_last_page_len = HostTensor();
  dense.max_blocks_per_seq = 0;
  dense.block_tables = HostTensor(DType::i64, Shape{S, int64_t(verdict.max_blocks_per_seq)});
  dense.context_lens = HostTensor(DType::i64, Shape{S});
  std::copy(verdict.tables.begin(), verdict.tables.end(), dense.block_tables.as<int64_t>());
  std::copy(verdict.lens.begin(), verdict.lens.end(), dense.context_lens.as<int64_t>());
  const DecodeResult got = reference::decode_attention(in, {}, {}, true);
  const DecodeResult want = reference::decode_attention(dense, {}, {}, true);
  FUZZ_CHECK(same_bytes(got.output, want.output) && same_bytes(got.lse, want.lse),
             "the CSR form's output differs from its dense form's");
  return 0;
}

}  // namespace
}  // namespace vkpaged::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider p(data, size);
  return vkpaged::fuzz::run(p);
}
