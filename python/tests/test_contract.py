# SPDX-License-Identifier: Apache-2.0
"""docs/contract.md's multi-query attention through the host path, against the float64 NumPy
implementation of contract_math.py: decode batches, prompt chunks after cached prefixes mixed
with decode requests, and speculative requests with tree masks, on every cache layout with f16,
bf16 and fp8 (E4M3 and E5M2) caches; then the optional features (sliding window, soft cap, ALiBi,
sinks, scale) on every layout."""
import numpy as np
import pytest

import vkpaged
from contract_math import attention, check_attention
from steps import build_step

LAYOUTS = ["vllm", "nhd", "hnd"]
# (cache dtype, query dtype): the query of an fp8 cache is f16, as the contract's tolerance says.
CACHES = [("f16", "f16"), ("bf16", "bf16"), ("fp8_e4m3", "f16"), ("fp8_e5m2", "f16")]


def requests_of(kind, rng, B):
    if kind == "decode":
        return [(int(rng.integers(0, 40)), 1) for _ in range(4)] + [(0, 1), (B, 1)]
    if kind == "chunks":  # a whole prompt, chunks after cached prefixes, a decode request
        return [(0, 9), (13, 6), (B, 3), (20, 1)]
    return [(11, 5), (0, 4), (2 * B - 1, 3), (7, 1)]  # tree: speculative requests, and a decode one


@pytest.mark.parametrize("kind", ["decode", "chunks", "tree"])
@pytest.mark.parametrize("cache_dtype,query_dtype", CACHES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_batch_attention_matches_the_contract(ctx, rng, layout, cache_dtype, query_dtype, kind):
    fp8 = cache_dtype.startswith("fp8")
    k_scale, v_scale = (0.5, 2.0) if fp8 else (1.0, 1.0)
    B = 8
    step = build_step(rng, requests_of(kind, rng, B), layout, query_dtype, cache_dtype, block_size=B,
                      k_scale=k_scale, v_scale=v_scale, tree=kind == "tree")
    masks = step.masks if kind == "tree" else None
    out, lse = vkpaged.batch_attention(
        ctx, step.query, step.key_cache, step.value_cache, step.block_tables, step.context_lens, step.query_starts,
        tree_mask=step.tree_mask() if masks else None, query_dtype=query_dtype, cache_dtype=cache_dtype,
        kv_layout=layout, k_scale=k_scale, v_scale=v_scale, return_lse=True)
    want_out, want_lse = attention(step.q, step.k, step.v, step.block_tables, step.context_lens, step.query_starts,
                                   masks)
    check_attention(out, lse, want_out, want_lse, query_dtype)
    assert out.dtype == (np.uint16 if query_dtype == "bf16" else np.float16)

    if kind == "decode":  # the same batch through the decode entry point: query [S, H, D]
        out, lse = vkpaged.decode_attention(
            ctx, step.query, step.key_cache, step.value_cache, step.block_tables, step.context_lens,
            query_dtype=query_dtype, cache_dtype=cache_dtype, kv_layout=layout, k_scale=k_scale, v_scale=v_scale,
            return_lse=True)
        check_attention(out, lse, want_out, want_lse, query_dtype)


@pytest.mark.parametrize("kind", ["chunks", "tree"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_window_softcap_alibi_sinks_and_scale_match_the_contract(ctx, rng, layout, kind):
    B, H = 4, 4
    step = build_step(rng, requests_of(kind, rng, B), layout, "f32", "f32", heads=H, block_size=B,
                      tree=kind == "tree")
    masks = step.masks if kind == "tree" else None
    alibi = rng.uniform(-0.5, 0, H).astype(np.float32)
    sinks = rng.uniform(-1, 1, H).astype(np.float32)
    features = dict(scale=0.3, softcap=2.5, sliding_window=7)
    out, lse = vkpaged.batch_attention(
        ctx, step.query, step.key_cache, step.value_cache, step.block_tables, step.context_lens, step.query_starts,
        tree_mask=step.tree_mask() if masks else None, kv_layout=layout, alibi_slopes=alibi, sinks=sinks,
        return_lse=True, **features)
    want_out, want_lse = attention(step.q, step.k, step.v, step.block_tables, step.context_lens, step.query_starts,
                                   masks, scale=0.3, softcap=2.5, alibi=alibi.astype(np.float64),
                                   sinks=sinks.astype(np.float64), window=7)
    check_attention(out, lse, want_out, want_lse, "f32")


def test_the_cpu_reference_matches_the_contract(rng):
    step = build_step(rng, requests_of("tree", rng, 8), "nhd", "bf16", "bf16", tree=True)
    out, lse = vkpaged.reference.batch_attention(
        step.query, step.key_cache, step.value_cache, step.block_tables, step.context_lens, step.query_starts,
        tree_mask=step.tree_mask(), query_dtype="bf16", cache_dtype="bf16", kv_layout="nhd", return_lse=True)
    want_out, want_lse = attention(step.q, step.k, step.v, step.block_tables, step.context_lens, step.query_starts,
                                   step.masks)
    check_attention(out, lse, want_out, want_lse, "bf16")


def test_merging_two_halves_of_a_context_is_attention_over_it(ctx, rng):
    """Cascade attention: the first 16 positions and the rest attended apart, then merged."""
    step = build_step(rng, [(30, 1), (20, 1)], "vllm", "f32", "f32", block_size=16)
    whole_out, whole_lse = attention(step.q, step.k, step.v, step.block_tables, step.context_lens, step.query_starts)
    prefix_lens = np.array([16, 16], np.int32)
    a = vkpaged.decode_attention(ctx, step.query, step.key_cache, step.value_cache, step.block_tables, prefix_lens,
                                 return_lse=True)
    # The suffix: the same sequences through block tables that start after the first block, with
    # ALiBi off, so positions shift without changing the math.
    b = vkpaged.decode_attention(ctx, step.query, step.key_cache, step.value_cache,
                                 np.ascontiguousarray(step.block_tables[:, 1:]), step.context_lens - 16,
                                 return_lse=True)
    out, lse = vkpaged.merge_attention(ctx, a[0], a[1], b[0], b[1])
    np.testing.assert_allclose(out, whole_out, atol=1e-4, rtol=0)
    np.testing.assert_allclose(lse, whole_lse, atol=1e-4, rtol=0)
