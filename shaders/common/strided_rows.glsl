// SPDX-License-Identifier: Apache-2.0
// Strided [tokens, heads, D] views (shader_interface.h, StridedRows): the queries, new keys and
// values, and outputs. A kernel finds a row's first word once and reads or writes the row's D
// contiguous elements from there (VKP_LOAD_ELEMENT(words, row_word(...), d, dtype), or whole
// words at row_word + w), so that the strides cost nothing per element.
#ifndef VKPAGED_STRIDED_ROWS_GLSL
#define VKPAGED_STRIDED_ROWS_GLSL

// The first word of row (token, head) of a StridedRows `rows` of the push block, from the start
// of its bound range. (A macro over the fields: a push-constant struct passed by value is a copy
// between differently laid-out types, which SPIR-V before 1.4 cannot express.)
uint strided_row_word(uint token_stride, uint head_and_offset, uint token, uint head) {
  return (head_and_offset & ROWS_OFFSET_MASK) + token * token_stride + head * (head_and_offset >> ROWS_OFFSET_BITS);
}
#define row_word(rows, token, head) strided_row_word((rows).token_stride, (rows).head_and_offset, (token), (head))

#endif
