# SPDX-License-Identifier: Apache-2.0
"""Random engine steps over a paged cache, as the host path takes them: each request is
(prefix, q_s): q_s new query tokens after `prefix` positions already in the cache. The arrays are
what the library reads (bf16 as uint16 bits, fp8 as uint8 codes) beside the float64 values the
contract reads them as."""
from dataclasses import dataclass, field

import numpy as np

from contract_math import ELEMENT_BYTES, as_nhbd, cache_shapes, random_tree, store


@dataclass
class Step:
    query: np.ndarray          # [T, H, D] as stored
    key_cache: np.ndarray      # in the layout, as stored
    value_cache: np.ndarray
    block_tables: np.ndarray   # [S, M] int32
    context_lens: np.ndarray   # [S] int32
    query_starts: np.ndarray   # [S + 1] int32
    q: np.ndarray              # float64 values: query [T, H, D]
    k: np.ndarray              # [N, Hkv, B, D]
    v: np.ndarray
    masks: list = field(default_factory=list)  # per request a q_s x q_s 0/1 array, or None

    def tree_mask(self):
        return np.concatenate([m.reshape(-1) for m in self.masks]).astype(np.uint8)


def build_step(rng, requests, layout="vllm", query_dtype="f16", cache_dtype="f16", heads=4, kv_heads=2,
               head_size=32, block_size=8, k_scale=1.0, v_scale=1.0, tree=False):
    B, D = block_size, head_size
    lens = [p + q for p, q in requests]
    used = [(L + B - 1) // B for L in lens]
    M, N = max(used) + 1, sum(used) + 3
    T = sum(q for _, q in requests)
    query, q = store(rng, rng.uniform(-1, 1, (T, heads, D)), query_dtype)
    x = 16 // ELEMENT_BYTES[cache_dtype]
    k_shape, v_shape = cache_shapes(layout, N, kv_heads, D, B, x)
    key_cache, k = store(rng, rng.uniform(-1, 1, k_shape), cache_dtype, k_scale)
    value_cache, v = store(rng, rng.uniform(-1, 1, v_shape), cache_dtype, v_scale)
    k, v = as_nhbd(layout, k, v)
    # Each request's blocks anywhere in the pool; the columns past them hold any valid id.
    pool, tables, nxt = rng.permutation(N), rng.integers(0, N, (len(requests), M)), 0
    for s, n in enumerate(used):
        tables[s, :n] = pool[nxt:nxt + n]
        nxt += n
    starts = np.concatenate([[0], np.cumsum([q for _, q in requests])]).astype(np.int32)
    masks = [random_tree(rng, qs) for _, qs in requests] if tree else []
    return Step(query, key_cache, value_cache, tables.astype(np.int32), np.array(lens, np.int32), starts, q, k, v,
                masks)


def csr_of(block_tables, context_lens, block_size):
    """FlashInfer's CSR page tables of dense ones: (kv_indptr [S + 1], kv_indices [nnz],
    kv_last_page_len [S]), int32; request s holds its first ceil(L_s / B) blocks, the last of them
    filled to L_s - (pages - 1) * B (0 without pages)."""
    pages = [(int(L) + block_size - 1) // block_size for L in context_lens]
    indptr = np.concatenate([[0], np.cumsum(pages)]).astype(np.int32)
    indices = np.concatenate([np.asarray(block_tables)[s, :n] for s, n in enumerate(pages)] +
                             [np.zeros(0)]).astype(np.int32)
    last = np.array([int(L) - (n - 1) * block_size if n else 0 for L, n in zip(context_lens, pages)], np.int32)
    return indptr, indices, last
