# SPDX-License-Identifier: Apache-2.0
"""FlashInfer's CSR page tables (kv_indptr, kv_indices, kv_last_page_len) in place of block
tables and context lengths: the same results as the dense tables, bit for bit, on the host path
(device and CPU reference) and the engine path (free record_attention, KvCache.record_decode),
on every cache layout; the dense results checked against contract_math.py."""
import numpy as np
import pytest

import vkpaged
from contract_math import TOLERANCE, attention, stored_values
from steps import build_step, csr_of

LAYOUTS = ["vllm", "nhd", "hnd"]
H, HKV, D, B = 4, 2, 32, 8
MIXED = [(0, 9), (13, 6), (B, 3), (20, 1)]  # (cached prefix, new tokens): a prompt, chunks, a decode token
DECODE = [(30, 1), (0, 1), (B - 1, 1), (2 * B, 1)]


def csr(step):
    return dict(zip(("kv_indptr", "kv_indices", "kv_last_page_len"), csr_of(step.block_tables, step.context_lens, B)))


def assert_identical(a, b):
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_csr_page_tables_give_the_dense_results_bit_for_bit_on_the_host_path(ctx, rng, layout):
    step = build_step(rng, MIXED, layout, block_size=B)
    M = step.block_tables.shape[1]  # the same M, so that both plans split alike
    common = dict(kv_layout=layout, return_lse=True)
    dense = vkpaged.batch_attention(ctx, step.query, step.key_cache, step.value_cache, step.block_tables,
                                    step.context_lens, step.query_starts, **common)
    paged = vkpaged.batch_attention(ctx, step.query, step.key_cache, step.value_cache, query_starts=step.query_starts,
                                    max_blocks_per_seq=M, **csr(step), **common)
    assert_identical(dense, paged)
    with pytest.raises(vkpaged.InvalidArgumentError, match="^block_tables: given together with kv_indptr: "):
        vkpaged.batch_attention(ctx, step.query, step.key_cache, step.value_cache, step.block_tables,
                                step.context_lens, step.query_starts, **csr(step), **common)
    want, _ = attention(step.q, step.k, step.v, step.block_tables, step.context_lens, step.query_starts)
    np.testing.assert_allclose(stored_values(dense[0], "f16"), want, atol=TOLERANCE["f16"], rtol=0)

    reference = vkpaged.reference.batch_attention(step.query, step.key_cache, step.value_cache, step.block_tables,
                                                  step.context_lens, step.query_starts, **common)
    assert_identical(reference, vkpaged.reference.batch_attention(
        step.query, step.key_cache, step.value_cache, query_starts=step.query_starts, max_blocks_per_seq=M,
        **csr(step), **common))

    step = build_step(rng, DECODE, layout, block_size=B)
    M = step.block_tables.shape[1]
    dense = vkpaged.decode_attention(ctx, step.query, step.key_cache, step.value_cache, step.block_tables,
                                     step.context_lens, **common)
    assert_identical(dense, vkpaged.decode_attention(ctx, step.query, step.key_cache, step.value_cache,
                                                     max_blocks_per_seq=M, **csr(step), **common))
    want, _ = attention(step.q, step.k, step.v, step.block_tables, step.context_lens, step.query_starts)
    np.testing.assert_allclose(stored_values(dense[0], "f16"), want, atol=TOLERANCE["f16"], rtol=0)


def device_csr(ctx, step, junk):
    """The CSR arrays in device memory; kv_indices with `junk` entries past kv_indptr[S], which
    are never read (an engine sizes it for its largest step)."""
    arrays = csr(step)
    arrays["kv_indices"] = np.concatenate([arrays["kv_indices"], np.full(junk, 1 << 20, np.int32)])
    return {name: ctx.tensor_from(a) for name, a in arrays.items()}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_csr_page_tables_give_the_dense_results_bit_for_bit_on_the_engine_path(ctx, rng, layout):
    status = ctx.tensor_from(np.zeros(1, np.uint32))
    # Multi-query attention over any views: one plan takes either form per call.
    step = build_step(rng, MIXED, layout, block_size=B)
    (S, M), T, N = step.block_tables.shape, len(step.query), len(step.key_cache)
    shape = vkpaged.AttentionShape(num_requests=S, num_query_tokens=T, num_heads=H, num_kv_heads=HKV, head_size=D,
                                   block_size=B, num_blocks=N, max_blocks_per_seq=M, kv_layout=layout,
                                   csr_page_table=True)
    plan = vkpaged.AttentionPlan(ctx, shape, step.query_starts)
    assert plan.scratch_bytes > 0  # the expansion's room
    scratch = ctx.create_buffer(plan.scratch_bytes).view()
    views = dict(query=ctx.tensor_from(step.query), key_cache=ctx.tensor_from(step.key_cache),
                 value_cache=ctx.tensor_from(step.value_cache), query_starts=ctx.tensor_from(step.query_starts),
                 scratch=scratch, status=status.memory)
    outputs = [ctx.create_buffer(step.query.nbytes).tensor("f16", step.query.shape) for _ in range(2)]
    with vkpaged.CommandBuffer(ctx) as cmd:
        vkpaged.record_attention(cmd, plan, block_tables=ctx.tensor_from(step.block_tables),
                                 context_lens=ctx.tensor_from(step.context_lens), output=outputs[0], **views)
        cmd.barrier()  # the two share the scratch
        vkpaged.record_attention(cmd, plan, output=outputs[1], **device_csr(ctx, step, 5), **views)
    np.testing.assert_array_equal(outputs[0].read(), outputs[1].read())
    want, _ = attention(step.q, step.k, step.v, step.block_tables, step.context_lens, step.query_starts)
    np.testing.assert_allclose(stored_values(outputs[0].read(), "f16"), want, atol=TOLERANCE["f16"], rtol=0)

    # Decode over a KvCache's pools.
    step = build_step(rng, DECODE, layout, block_size=B)
    (S, M), N = step.block_tables.shape, len(step.key_cache)
    cache = vkpaged.KvCache(ctx, vkpaged.KvCacheShape(num_kv_heads=HKV, head_size=D, block_size=B, layout=layout),
                            num_blocks=N)
    assert cache.num_blocks == N
    cache.key_cache(0).write(step.key_cache)
    cache.value_cache(0).write(step.value_cache)
    plan = vkpaged.DecodePlan(ctx, cache.decode_shape(vkpaged.DecodeShape(num_seqs=S, num_heads=H,
                                                                          max_blocks_per_seq=M, csr_page_table=True)))
    scratch = ctx.create_buffer(plan.scratch_bytes).view()
    query = ctx.tensor_from(step.query)
    outputs = [ctx.create_buffer(step.query.nbytes).tensor("f16", step.query.shape) for _ in range(2)]
    with vkpaged.CommandBuffer(ctx) as cmd:
        cache.record_decode(cmd, 0, plan, query=query, block_tables=ctx.tensor_from(step.block_tables),
                            context_lens=ctx.tensor_from(step.context_lens), output=outputs[0], scratch=scratch,
                            status=status.memory)
        cmd.barrier()
        cache.record_decode(cmd, 0, plan, query=query, output=outputs[1], scratch=scratch, status=status.memory,
                            **device_csr(ctx, step, 0))
    np.testing.assert_array_equal(outputs[0].read(), outputs[1].read())
    want, _ = attention(step.q, step.k, step.v, step.block_tables, step.context_lens, step.query_starts)
    np.testing.assert_allclose(stored_values(outputs[0].read(), "f16"), want, atol=TOLERANCE["f16"], rtol=0)
    assert status.read()[0] == 0  # no flag: the entries past kv_indptr[S] were not read
