# SPDX-License-Identifier: Apache-2.0
"""The engine path: a KvCache and a BlockManager, device buffers written from numpy, plans made
once, and each step recorded into a CommandBuffer (keys rotated into the cache, attention of
every layer) and submitted; checked against contract_math.py over the pools read back."""
import numpy as np
import pytest

import vkpaged
from contract_math import TOLERANCE, as_nhbd, attention, rotate, stored_values

H, HKV, D, B = 4, 2, 32, 4
LAYERS = 2
MAX_POSITION = 64


def pools(cache, layer):
    """A layer's pools as float64 [N, Hkv, B, D] (fp8 with scale 1)."""
    k = stored_values(cache.key_cache(layer).read(), cache.dtype)
    v = stored_values(cache.value_cache(layer).read(), cache.dtype)
    return as_nhbd(cache.layout, k, v)


def random_values(rng, shape, dtype):
    """Host arrays of `dtype` (bf16 as uint16 bits) and the float64 values they hold."""
    x = rng.uniform(-1, 1, shape)
    if dtype == "bf16":
        bits = vkpaged.float_to_bits(x, "bf16")
        return bits, stored_values(bits, "bf16")
    a = x.astype(np.float16)
    return a, a.astype(np.float64)


class Engine:
    """The smallest engine: per step, new tokens of some sequences (prompt chunks, decode tokens)
    go into the cache with rotary embedding, then every layer attends them all in one plan."""

    def __init__(self, ctx, layout, dtype, num_blocks=32):
        self.ctx, self.dtype = ctx, dtype
        self.act = "bf16" if dtype == "bf16" else "f16"  # the activations' dtype
        shape = vkpaged.KvCacheShape(num_layers=LAYERS, num_kv_heads=HKV, head_size=D, block_size=B, dtype=dtype,
                                     layout=layout)
        self.cache = vkpaged.KvCache(ctx, shape, num_blocks=num_blocks, num_host_blocks=8)
        self.blocks = vkpaged.BlockManager(self.cache.num_blocks, B, num_host_blocks=self.cache.num_host_blocks)
        for layer in range(LAYERS):  # defined contents (a new cache's are not)
            for view in (self.cache.key_cache(layer), self.cache.value_cache(layer)):
                view.write(np.zeros(view.shape, {"fp8_e4m3": np.uint8, "bf16": np.uint16}.get(dtype, np.float16)))
        self.cos_sin = ctx.tensor_from(vkpaged.rotary_cos_sin_cache(MAX_POSITION, D))
        self.status = ctx.tensor_from(np.zeros(1, np.uint32))

    def step(self, requests, M):
        """requests: (seq, first, count). Returns, per layer, the query before rotation (float64),
        the output (float64) and the plan."""
        slots, positions, starts, lens, tables = [], [], [0], [], []
        for seq, first, count in requests:
            slots += list(self.blocks.slot_mapping(seq, first, count))
            positions += list(range(first, first + count))
            starts.append(starts[-1] + count)
            lens.append(first + count)
            tables.append(self.blocks.block_table(seq, M))
        T, S = len(slots), len(requests)
        ctx, rng = self.ctx, np.random.default_rng(T * 131 + S)
        batch = vkpaged.AttentionShape(num_requests=S, num_query_tokens=T, num_heads=H, max_blocks_per_seq=M,
                                       max_context_len=max(lens), query_dtype=self.act)
        plan = vkpaged.AttentionPlan(ctx, self.cache.attention_shape(batch), starts)
        scratch = ctx.create_buffer(max(plan.scratch_bytes, 16))
        step_arrays = dict(
            slot_mapping=ctx.tensor_from(np.array(slots, np.int64), host_visible=True),
            positions=ctx.tensor_from(np.array(positions, np.int64), host_visible=True),
            block_tables=ctx.tensor_from(np.array(tables, np.int32), host_visible=True),
            context_lens=ctx.tensor_from(np.array(lens, np.int32), host_visible=True),
            query_starts=ctx.tensor_from(np.array(starts, np.int32), host_visible=True))
        layers = []
        with vkpaged.CommandBuffer(ctx) as cmd:
            for layer in range(LAYERS):
                q_host, q = random_values(rng, (T, H, D), self.act)
                k_host, k = random_values(rng, (T, HKV, D), self.act)
                v_host, v = random_values(rng, (T, HKV, D), self.act)
                query = ctx.tensor_from(q_host, dtype=self.act)
                out = ctx.create_buffer(q_host.nbytes).tensor(self.act, (T, H, D))
                self.cache.record_reshape_and_cache(
                    cmd, layer, key=ctx.tensor_from(k_host, dtype=self.act),
                    value=ctx.tensor_from(v_host, dtype=self.act), slot_mapping=step_arrays["slot_mapping"],
                    status=self.status.memory, query=query, positions=step_arrays["positions"],
                    cos_sin_cache=self.cos_sin)
                cmd.barrier()
                self.cache.record_attention(
                    cmd, layer, plan, query=query, block_tables=step_arrays["block_tables"],
                    context_lens=step_arrays["context_lens"], query_starts=step_arrays["query_starts"], output=out,
                    scratch=scratch.view() if plan.scratch_bytes else None, status=self.status.memory)
                cmd.barrier()
                layers.append(dict(q=q, k=k, v=v, query=query, out=out))
        assert self.status.read()[0] == 0
        return layers, plan, step_arrays, np.array(positions), np.array(slots)


@pytest.mark.parametrize("dtype", ["f16", "bf16", "fp8_e4m3"])
@pytest.mark.parametrize("layout", ["vllm", "nhd", "hnd"])
def test_an_engine_step_caches_rotated_keys_and_attends_a_mixed_batch(ctx, layout, dtype):
    engine = Engine(ctx, layout, dtype)
    M = 8
    # Step 1: a whole prompt and the first chunk of another; step 2: a decode token of the first,
    # the second's last chunk after its cached prefix, a new prompt.
    engine.blocks.add_sequence(1, list(range(100, 113)))
    engine.blocks.add_sequence(2, list(range(200, 220)))
    engine.step([(1, 0, 13), (2, 0, 12)], M)
    engine.blocks.append_token(1, 113)
    engine.blocks.add_sequence(3, list(range(300, 305)))
    layers, plan, arrays, positions, slots = engine.step([(1, 13, 1), (2, 12, 8), (3, 0, 5)], M)
    cos_sin = vkpaged.rotary_cos_sin_cache(MAX_POSITION, D).astype(np.float64)
    tables, lens, starts = (arrays[n].read() for n in ("block_tables", "context_lens", "query_starts"))
    tol = TOLERANCE[engine.act]
    for layer, got in enumerate(layers):
        k_cache, v_cache = pools(engine.cache, layer)
        # The queries rotated in place; the keys rotated into their slots, values as they were.
        np.testing.assert_allclose(stored_values(got["query"].read(), engine.act), rotate(got["q"], positions, cos_sin,
                                                                                         "neox"), atol=tol, rtol=0)
        quantum = {"f16": 1e-3, "bf16": 8e-3, "fp8_e4m3": 0.07}[dtype]  # half an ulp near 1, plus rotation rounding
        block, offset = slots // B, slots % B
        np.testing.assert_allclose(k_cache[block, :, offset, :], rotate(got["k"], positions, cos_sin, "neox"),
                                   atol=quantum, rtol=0)
        np.testing.assert_allclose(v_cache[block, :, offset, :], got["v"], atol=quantum, rtol=0)
        # Attention of the whole step over what the cache holds.
        q_rotated = stored_values(got["query"].read(), engine.act)
        want, _ = attention(q_rotated, k_cache, v_cache, tables, lens, starts)
        np.testing.assert_allclose(stored_values(got["out"].read(), engine.act), want, atol=tol, rtol=0)


def test_plans_made_once_replay_decode_steps_with_changing_lengths(ctx):
    """One DecodePlan and one AttentionPlan for the batch, made before the first step; each step
    the sequences grow by one token (crossing blocks), the block tables and lengths are rewritten
    in place, the new keys and values written, and both plans run on the new data."""
    engine = Engine(ctx, "nhd", "f16", num_blocks=40)
    S, M = 3, 6
    prompts = {10: 3, 11: 8, 12: 1}  # different lengths, so the batch is ragged
    first = []
    for seq, n in prompts.items():
        engine.blocks.add_sequence(seq, list(range(n)))
        first.append((seq, 0, n))
    engine.step(first, M)  # the prompts into the cache

    decode_plan = vkpaged.DecodePlan(ctx, engine.cache.decode_shape(vkpaged.DecodeShape(
        num_seqs=S, num_heads=H, max_blocks_per_seq=M, query_dtype="f16")))
    attention_plan = vkpaged.AttentionPlan(ctx, engine.cache.attention_shape(vkpaged.AttentionShape(
        num_requests=S, num_query_tokens=S, num_heads=H, max_blocks_per_seq=M, query_dtype="f16")), np.arange(S + 1))
    tables = ctx.create_buffer(S * M * 4, host_visible=True).tensor("i32", (S, M))
    lens = ctx.create_buffer(S * 4, host_visible=True).tensor("i32", (S,))
    starts = ctx.tensor_from(np.arange(S + 1, dtype=np.int32))
    query = ctx.create_buffer(S * H * D * 2).tensor("f16", (S, H, D))
    out_decode = ctx.create_buffer(S * H * D * 2).tensor("f16", (S, H, D))
    out_attention = ctx.create_buffer(S * H * D * 2).tensor("f16", (S, H, D))
    scratch = ctx.create_buffer(max(decode_plan.scratch_bytes, attention_plan.scratch_bytes, 16))
    seen_lengths = set()
    rng = np.random.default_rng(7)
    for step in range(6):
        for seq in prompts:
            engine.blocks.append_token(seq, step)
        block_tables, context_lens = engine.blocks.build_batch(list(prompts), M)
        seen_lengths.add(tuple(context_lens))
        slots = np.array([engine.blocks.slot_mapping(seq, int(n) - 1, 1)[0] for seq, n in zip(prompts, context_lens)])
        k_host = rng.uniform(-1, 1, (S, HKV, D)).astype(np.float16)
        v_host = rng.uniform(-1, 1, (S, HKV, D)).astype(np.float16)
        q_host = rng.uniform(-1, 1, (S, H, D)).astype(np.float16)
        tables.write(block_tables)
        lens.write(context_lens)
        query.write(q_host)
        with vkpaged.CommandBuffer(ctx) as cmd:
            engine.cache.record_reshape_and_cache(cmd, 0, key=ctx.tensor_from(k_host), value=ctx.tensor_from(v_host),
                                                  slot_mapping=ctx.tensor_from(slots.astype(np.int64)))
            cmd.barrier()
            views = dict(query=query, block_tables=tables, context_lens=lens)
            engine.cache.record_decode(cmd, 0, decode_plan, output=out_decode,
                                       scratch=scratch.view() if decode_plan.scratch_bytes else None, **views)
            cmd.barrier()  # the two share the scratch
            engine.cache.record_attention(cmd, 0, attention_plan, query_starts=starts, output=out_attention,
                                          scratch=scratch.view() if attention_plan.scratch_bytes else None, **views)
        k_cache, v_cache = pools(engine.cache, 0)
        want, _ = attention(q_host.astype(np.float64), k_cache, v_cache, block_tables, context_lens, np.arange(S + 1))
        np.testing.assert_allclose(out_decode.read().astype(np.float64), want, atol=3e-3, rtol=0)
        np.testing.assert_allclose(out_attention.read().astype(np.float64), want, atol=3e-3, rtol=0)
    assert len(seen_lengths) == 6


def test_copy_on_write_swaps_and_gather_move_whole_blocks(ctx, rng):
    engine = Engine(ctx, "vllm", "f16")
    cache, blocks = engine.cache, engine.blocks
    for layer in range(LAYERS):  # known contents in every block of every layer
        for view in (cache.key_cache(layer), cache.value_cache(layer)):
            view.write(rng.uniform(-1, 1, view.shape).astype(np.float16))
    blocks.add_sequence(1, [5, 6, 7, 8, 9, 10])  # 1.5 blocks
    blocks.fork(1, 2)
    appended = blocks.append_token(2, 11)  # the shared, partly filled last block is copied first
    assert appended.copy is not None and appended.slot // B == appended.copy.dst
    before = [pools(cache, layer) for layer in range(LAYERS)]
    with vkpaged.CommandBuffer(ctx) as cmd:
        cache.record_copy_blocks(cmd, [appended.copy])
    for layer in range(LAYERS):
        for got, was in zip(pools(cache, layer), before[layer]):  # keys, then values
            np.testing.assert_array_equal(got[appended.copy.dst], was[appended.copy.src])

    # Swapped out: each (device, host) pair copied to the host pool; back in: each host block to
    # its new device block, which then holds what the swapped-out block held.
    device_table = blocks.block_table(2)
    out_pairs = blocks.swap_out(2)
    assert [p.src for p in out_pairs] == list(device_table) and blocks.is_swapped(2)
    swapped = [pools(cache, layer) for layer in range(LAYERS)]
    with vkpaged.CommandBuffer(ctx) as cmd:
        cache.record_swap_out(cmd, out_pairs)
    for layer in range(LAYERS):
        host = as_nhbd("vllm", stored_values(cache.host_key_cache(layer).read(), "f16"),
                       stored_values(cache.host_value_cache(layer).read(), "f16"))
        for src, dst in out_pairs:
            for got, was in zip(host, swapped[layer]):
                np.testing.assert_array_equal(got[dst], was[src])
    in_pairs = blocks.swap_in(2)
    assert not blocks.is_swapped(2)
    with vkpaged.CommandBuffer(ctx) as cmd:
        cache.record_swap_in(cmd, [(p.src, p.dst) for p in in_pairs])  # tuples do as well
    device_of_host = {p.src: p.dst for p in in_pairs}
    for layer in range(LAYERS):
        for got, was in zip(pools(cache, layer), swapped[layer]):
            for src, host_block in out_pairs:
                np.testing.assert_array_equal(got[device_of_host[host_block]], was[src])

    # gather: both sequences' positions, paged to contiguous rows.
    seqs = [1, 2]
    tables, lens = blocks.build_batch(seqs, 4)
    seq_starts = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    T = int(seq_starts[-1])
    key_out = ctx.create_buffer(T * HKV * D * 4).tensor("f32", (T, HKV, D))
    value_out = ctx.create_buffer(T * HKV * D * 4).tensor("f32", (T, HKV, D))
    with vkpaged.CommandBuffer(ctx) as cmd:
        cache.record_gather(cmd, 1, block_tables=ctx.tensor_from(tables), seq_starts=ctx.tensor_from(seq_starts),
                            key_out=key_out, value_out=value_out)
    k_pool, v_pool = pools(cache, 1)
    for s, seq in enumerate(seqs):
        for p in range(int(lens[s])):
            b = tables[s, p // B]
            np.testing.assert_array_equal(key_out.read()[seq_starts[s] + p], k_pool[b, :, p % B, :])
            np.testing.assert_array_equal(value_out.read()[seq_starts[s] + p], v_pool[b, :, p % B, :])


def test_a_refused_record_leaves_the_command_buffer_usable(ctx):
    engine = Engine(ctx, "hnd", "f16")
    engine.blocks.add_sequence(1, [1, 2, 3])
    rng = np.random.default_rng(5)
    for view in (engine.cache.key_cache(0), engine.cache.value_cache(0)):
        view.write(rng.uniform(-1, 1, view.shape).astype(np.float16))
    plan = vkpaged.AttentionPlan(ctx, engine.cache.attention_shape(vkpaged.AttentionShape(
        num_requests=1, num_query_tokens=3, num_heads=H, max_blocks_per_seq=2, query_dtype="f16")), [0, 3])
    wrong_query = ctx.create_buffer(3 * H * D * 4).tensor("f32", (3, H, D))  # f32 where the plan says f16
    arrays = dict(block_tables=ctx.tensor_from(engine.blocks.block_table(1, 2).reshape(1, 2)),
                  context_lens=ctx.tensor_from(np.array([3], np.int32)),
                  query_starts=ctx.tensor_from(np.array([0, 3], np.int32)))
    out = ctx.create_buffer(3 * H * D * 2).tensor("f16", (3, H, D))
    cmd = vkpaged.CommandBuffer(ctx)
    with pytest.raises(vkpaged.InvalidArgumentError, match="query"):
        engine.cache.record_attention(cmd, 0, plan, query=wrong_query, output=out, **arrays)
    other = vkpaged.Context()
    with pytest.raises(vkpaged.InvalidArgumentError, match="another Context"):
        engine.cache.record_attention(cmd, 0, plan, query=other.create_buffer(3 * H * D * 2).tensor("f16", (3, H, D)),
                                      output=out, **arrays)
    q_host = np.random.default_rng(3).uniform(-1, 1, (3, H, D)).astype(np.float16)
    engine.cache.record_attention(cmd, 0, plan, query=ctx.tensor_from(q_host), output=out, **arrays)
    cmd.submit()
    k_cache, v_cache = pools(engine.cache, 0)
    want, _ = attention(q_host.astype(np.float64), k_cache, v_cache, arrays["block_tables"].read(), [3], [0, 3])
    np.testing.assert_allclose(out.read().astype(np.float64), want, atol=3e-3, rtol=0)


def test_a_command_buffer_records_again_after_submit_and_discard(ctx, rng):
    """One CommandBuffer for several steps: submit() and discard() each leave it recording anew;
    a discarded recording never runs."""
    T, positions = 5, np.arange(3, 8)
    k_host = rng.uniform(-1, 1, (T, HKV, D)).astype(np.float32)
    key = ctx.tensor_from(k_host)
    cos_sin_host = vkpaged.rotary_cos_sin_cache(MAX_POSITION, D)
    rotary = dict(key=key, positions=ctx.tensor_from(positions), cos_sin_cache=ctx.tensor_from(cos_sin_host),
                  style="gptj")
    once = rotate(k_host, positions, cos_sin_host.astype(np.float64), "gptj")
    cmd = vkpaged.CommandBuffer(ctx)
    vkpaged.record_rotary_embedding(cmd, **rotary)
    cmd.submit()
    np.testing.assert_allclose(key.read(), once, atol=1e-5, rtol=0)
    vkpaged.record_rotary_embedding(cmd, **rotary)
    cmd.discard()
    cmd.submit()  # an empty recording
    np.testing.assert_allclose(key.read(), once, atol=1e-5, rtol=0)
    vkpaged.record_rotary_embedding(cmd, **rotary)
    cmd.submit()
    twice = rotate(once, positions, cos_sin_host.astype(np.float64), "gptj")
    np.testing.assert_allclose(key.read(), twice, atol=1e-5, rtol=0)
