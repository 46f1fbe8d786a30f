// SPDX-License-Identifier: Apache-2.0
// The scratch of a split over the key positions (split-K), shared by C++ and GLSL so that the
// planners size it and every kernel and merge addresses it from one definition. Each kernel
// that splits (decode and attention, portable and tensor-core, MLA) writes every partition's
// partial state of each row here; the merge pass (partition_merge.comp) and the decode's merge in
// its dispatch (split_merge.glsl) read them. In f32 words from the scratch's first (the push
// block's scratch_offset): every row's unnormalised value sums [rows][P][D], then their states
// (max, sum) [rows][P][2], for `rows` rows (a row is a (query token or sequence, head) pair,
// token * H + head), P partitions and value width D (the head size; MLA's Dv). A poisoned state
// has max NaN (softmax_state.glsl's rule).
#ifndef VKPAGED_SPLIT_SCRATCH_H
#define VKPAGED_SPLIT_SCRATCH_H

#ifdef __cplusplus
#include <cstdint>
namespace vkpaged::shader {
// The host sizes a scratch before it knows that it fits 32-bit words: 64 bits there.
#define VKP_SPLIT_WORD constexpr uint64_t
#define VKP_SPLIT_UINT uint64_t
#else
#define VKP_SPLIT_WORD uint
#define VKP_SPLIT_UINT uint
#endif

// The first word of a row's value sums of one partition.
VKP_SPLIT_WORD split_sums_word(VKP_SPLIT_UINT row, VKP_SPLIT_UINT part, VKP_SPLIT_UINT num_partitions,
                               VKP_SPLIT_UINT d_size) {
  return (row * num_partitions + part) * d_size;
}
// The word of a row's max of one partition (its sum follows).
VKP_SPLIT_WORD split_state_word(VKP_SPLIT_UINT row, VKP_SPLIT_UINT part, VKP_SPLIT_UINT num_rows,
                                VKP_SPLIT_UINT num_partitions, VKP_SPLIT_UINT d_size) {
  return num_rows * num_partitions * d_size + (row * num_partitions + part) * 2u;
}
// The words of the whole layout.
VKP_SPLIT_WORD split_scratch_words(VKP_SPLIT_UINT num_rows, VKP_SPLIT_UINT num_partitions, VKP_SPLIT_UINT d_size) {
  return split_state_word(num_rows, 0u, num_rows, num_partitions, d_size);
}

#undef VKP_SPLIT_WORD
#undef VKP_SPLIT_UINT
#ifdef __cplusplus
// The layout's bytes, as the planners size a split's scratch.
constexpr uint64_t split_scratch_bytes(uint64_t num_rows, uint64_t num_partitions, uint64_t d_size) {
  return 4 * split_scratch_words(num_rows, num_partitions, d_size);
}
}  // namespace vkpaged::shader
#endif

#endif  // VKPAGED_SPLIT_SCRATCH_H
