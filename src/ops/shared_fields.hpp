// SPDX-License-Identifier: Apache-2.0
#pragma once
// The fields the decode and attention descriptions share by name and meaning, listed once: a
// decode batch is the attention problem of one new token per request (attention_problem.hpp),
// and these lists move it between the two descriptions. A field both gain is one line here.
// Host only.

// DecodeShape and AttentionShape (and the cache's part of them, VKP_CACHE_SHAPE_FIELDS).
#define VKP_CACHE_SHAPE_FIELDS(X) X(num_kv_heads) X(head_size) X(block_size) X(num_blocks) X(cache_dtype) X(kv_layout)
#define VKP_SHARED_SHAPE_FIELDS(X)                                                                    \
  VKP_CACHE_SHAPE_FIELDS(X)                                                                           \
  X(num_heads) X(max_blocks_per_seq) X(max_context_len) X(query_dtype) X(softcap) X(alibi) X(sinks) X(lse) \
  X(csr_page_table)

// DecodeViews and AttentionViews.
#define VKP_SHARED_VIEW_FIELDS(X)                                                                       \
  X(query) X(key_cache) X(value_cache) X(block_tables) X(context_lens) X(output) X(alibi_slopes) X(sinks) \
  X(lse) X(scratch) X(status) X(kv_indptr) X(kv_indices) X(kv_last_page_len)

// Copies every listed field of `from` into `to`: VKP_COPY_FIELDS(VKP_SHARED_SHAPE_FIELDS, to, from).
#define VKP_COPY_FIELD(f) to_.f = from_.f;
#define VKP_COPY_FIELDS(LIST, to, from) \
  do {                                  \
    auto& to_ = (to);                   \
    const auto& from_ = (from);         \
    LIST(VKP_COPY_FIELD)                \
  } while (false)
