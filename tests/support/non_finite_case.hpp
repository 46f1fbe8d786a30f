// SPDX-License-Identifier: Apache-2.0
#pragma once
// Non-finite inputs placed in decode inputs, and the outputs the contract makes NaN for them
// (docs/contract.md, Decode step 9), worked out from the rule itself, not from the reference.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "support/decode_case.hpp"
#include "vkpaged/decode.hpp"

namespace vkpaged::test {

// One NaN or infinite element. Fp8 caches store the format's encoding (E4M3 has no infinity:
// an infinity becomes its NaN).
struct NonFinite {
  enum class Where { query, key, value };
  Where where = Where::query;
  int64_t seq = 0;
  int64_t head = 0;   // query: the query head; key and value: the kv head
  int64_t token = 0;  // key and value: the position (in its block through the sequence's table)
  int64_t dim = 0;
  double value = 0;   // NaN, +Inf or -Inf
};

void place(const DecodeCase& c, DecodeInputs& in, const NonFinite& e);

// Makes every position a decode must not read hold NaN: the slots past each length in its last
// block, and a spare block, full of NaN, that every block-table entry past ceil(len / B) names.
void fill_unread_with_nan(const DecodeCase& c, DecodeInputs& in);

// Which outputs [S, H, D] and LSEs [S, H] the rule makes NaN for `elements` with a sliding
// window `window` (0 = none): a query element of a head with an attended position, or a key of
// an attended position, makes the head's outputs and LSE NaN (a key: every head of its kv
// group); a value element of an attended position makes that dim of the group's heads NaN.
struct NanMask {
  std::vector<bool> output;
  std::vector<bool> lse;
};
NanMask nan_mask(const DecodeCase& c, const DecodeInputs& in, std::span<const NonFinite> elements, uint32_t window);

// `got` is NaN exactly where `mask` says, never infinite, and within `tol` of `clean` (the
// result of the inputs without the non-finite elements) elsewhere; LSE likewise when `lse`.
void expect_nan_exactly_where(const DecodeResult& got, const DecodeResult& clean, const NanMask& mask, double tol,
                              bool lse, const std::string& label);

// The case's inputs (random from `seed`, every unread slot NaN: fill_unread_with_nan) without and
// with the non-finite `elements`.
struct NonFiniteInputs {
  DecodeInputs clean;
  DecodeInputs dirty;
};
NonFiniteInputs make_non_finite_inputs(const DecodeCase& c, std::span<const NonFinite> elements, uint32_t seed = 7);

// A set of non-finite elements for the lengths {0, 5, 40, 600, 300, 33}, 4 heads, 2 kv heads:
// NaN, +Inf and -Inf in queries, keys and values, of positions inside and outside a window of
// 24, in the first and last positions, and a query of an empty sequence.
DecodeCase non_finite_case(DType query, DType cache);
std::vector<NonFinite> non_finite_elements();

}  // namespace vkpaged::test
