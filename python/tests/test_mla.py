# SPDX-License-Identifier: Apache-2.0
"""docs/contract.md's multi-head latent attention (MLA) against the float64 NumPy of
contract_math.py: the host path (mla_attention and reference.mla_attention) over both cache forms
with f16, bf16 and fp8 (E4M3, E5M2) caches for decode batches, chunks after cached prefixes and
speculative requests with tree masks, cached prefixes of 0, 1, B - 1, B, B + 1 and lengths 1,
B - 1, B, B + 1 over shuffled block tables;
then the engine path: an MLA KvCache of either form written through record_mla_reshape_and_cache
with RoPE on k_pe and read by record_mla_attention, one MlaPlan recorded for every decode step;
the same over an engine's own pools (the free functions) for a prompt chunk written and attended
in one submission; and the refusals."""
import numpy as np
import pytest

import vkpaged
from contract_math import check_attention, mla_attention, rotate, store, stored_values
from steps import build_step

FORMS = ["one_pool", "two_pools"]
# (cache dtype, query and token dtype): fp8 caches take f16 queries and tokens, as the contract's tolerance says.
CACHES = [("f16", "f16"), ("bf16", "bf16"), ("fp8_e4m3", "f16"), ("fp8_e5m2", "f16")]
# A written element against its float64 value: one step of the stored format (the device rotates
# in f32 and rounds to the token dtype, then to the cache's).
WRITE_RTOL = {"f32": 1e-6, "f16": 2.0 ** -10, "bf16": 2.0 ** -7, "fp8_e4m3": 2.0 ** -3, "fp8_e5m2": 2.0 ** -2}
DV, R = 64, 32


def requests_of(kind, B):
    """(cached prefix, new tokens) per request: prefixes and lengths 0 (prefixes only: a request of no
    new tokens is not a step an MlaPlan takes), 1, B - 1, B, B + 1 and longer."""
    if kind == "decode":
        return [(0, 1), (B - 2, 1), (B - 1, 1), (B, 1), (2 * B + 2, 1)]
    if kind == "chunks":  # a whole prompt (prefix 0), chunks after prefixes of 1, B - 1, B, B + 1
        return [(0, 9), (1, 6), (B - 1, 3), (B, 1), (B + 1, B + 2)]
    return [(11, 5), (0, 4), (2 * B - 1, 3), (7, 1)]  # tree: speculative requests, and a decode one


def split_rows(rows, form):
    """The pools of a form: (mla_cache,) or (ckv_cache, kpe_cache)."""
    if form == "one_pool":
        return {"mla_cache": rows, "value_head_size": DV}
    return {"ckv_cache": np.ascontiguousarray(rows[..., :DV]), "kpe_cache": np.ascontiguousarray(rows[..., DV:])}


# ---- the host path ----

@pytest.mark.parametrize("kind", ["decode", "chunks", "tree"])
@pytest.mark.parametrize("cache_dtype,query_dtype", CACHES)
@pytest.mark.parametrize("form", FORMS)
def test_mla_attention_matches_the_contract(ctx, rng, form, cache_dtype, query_dtype, kind):
    scale = 0.5 if cache_dtype.startswith("fp8") else 1.0
    B = 8
    # An MLA cache is nhd's rows with one kv head: the key cache of a one-head step [N, B, 1, Dk].
    step = build_step(rng, requests_of(kind, B), "nhd", query_dtype, cache_dtype, kv_heads=1, head_size=DV + R,
                      block_size=B, k_scale=scale, v_scale=scale, tree=kind == "tree")
    rows = np.ascontiguousarray(step.key_cache[:, :, 0, :])
    masks = step.masks if kind == "tree" else None
    arguments = dict(tree_mask=step.tree_mask() if masks else None, query_dtype=query_dtype,
                     cache_dtype=cache_dtype, k_scale=scale, v_scale=scale, return_lse=True, **split_rows(rows, form))
    out, lse = vkpaged.mla_attention(ctx, step.query, step.block_tables, step.context_lens, step.query_starts,
                                     **arguments)
    want_out, want_lse = mla_attention(step.q, step.k[:, 0], DV, step.block_tables, step.context_lens,
                                       step.query_starts, masks)
    check_attention(out, lse, want_out, want_lse, query_dtype)
    assert out.shape == (len(step.query), 4, DV)
    assert out.dtype == (np.uint16 if query_dtype == "bf16" else np.float16)
    ref_out, ref_lse = vkpaged.reference.mla_attention(step.query, step.block_tables, step.context_lens,
                                                       step.query_starts, **arguments)
    check_attention(ref_out, ref_lse, want_out, want_lse, query_dtype)


@pytest.mark.parametrize("split", ["single", "split"])
@pytest.mark.parametrize("form", FORMS)
def test_window_softcap_alibi_sinks_scale_and_split_match_the_contract(ctx, rng, form, split):
    B, H = 16, 3
    step = build_step(rng, [(300, 2), (9, 4), (0, 1)], "nhd", "f32", "f32", heads=H, kv_heads=1, head_size=DV + R,
                      block_size=B)
    rows = np.ascontiguousarray(step.key_cache[:, :, 0, :])
    alibi = rng.uniform(-0.5, 0, H).astype(np.float32)
    sinks = rng.uniform(-1, 1, H).astype(np.float32)
    out, lse = vkpaged.mla_attention(
        ctx, step.query, step.block_tables, step.context_lens, step.query_starts, alibi_slopes=alibi, sinks=sinks,
        scale=0.2, softcap=3.0, sliding_window=40, return_lse=True, split=split,
        partition_tokens=256 if split == "split" else 0, **split_rows(rows, form))
    want_out, want_lse = mla_attention(step.q, step.k[:, 0], DV, step.block_tables, step.context_lens,
                                       step.query_starts, scale=0.2, softcap=3.0, alibi=alibi.astype(np.float64),
                                       sinks=sinks.astype(np.float64), window=40)
    check_attention(out, lse, want_out, want_lse, "f32")


# ---- the engine path ----

def rows_of(views, form):
    """A layer's MLA pools read back as rows [N, B, Dv + R], as stored."""
    if form == "one_pool":
        return views.mla_cache.read()
    return np.concatenate([views.ckv_cache.read(), views.kpe_cache.read()], axis=-1)


def new_tokens(rng, count, token_dtype, positions, cos_sin, style):
    """kv_c [T, Dv] and k_pe [T, R] as stored, and the float64 row each token's write should leave:
    kv_c, then k_pe rotated and rounded to its dtype."""
    kv_c, kv_c_values = store(rng, rng.uniform(-1, 1, (count, DV)), token_dtype)
    k_pe, k_pe_values = store(rng, rng.uniform(-1, 1, (count, R)), token_dtype)
    _, rotated = store(rng, rotate(k_pe_values[:, None, :], positions, cos_sin, style)[:, 0, :], token_dtype)
    return kv_c, k_pe, np.concatenate([kv_c_values, rotated], axis=1)


def expect_written(before, after, slots, want_rows, cache_dtype, scale):
    """The rows at `slots` hold want_rows (within one step of the cache's format); every other row
    is as it was, byte for byte."""
    flat_before, flat_after = before.reshape(-1, after.shape[2]), after.reshape(-1, after.shape[2])
    written = np.zeros(len(flat_after), bool)
    live = slots >= 0
    written[slots[live]] = True
    got = stored_values(flat_after[slots[live]], cache_dtype, scale)
    atol = scale * 2.0 ** -9 if cache_dtype.startswith("fp8") else 1e-7
    np.testing.assert_allclose(got, want_rows[live], rtol=WRITE_RTOL[cache_dtype], atol=atol)
    # Bytes, not values: rows never written may hold anything, NaN patterns included.
    np.testing.assert_array_equal(flat_after[~written].view(np.uint8), flat_before[~written].view(np.uint8))


class Pages:
    """Block tables over a shuffled pool for requests that grow to `longest` positions."""

    def __init__(self, rng, lengths, B, extra_blocks=3):
        used = [(L + B - 1) // B for L in lengths]
        self.B, self.M, self.N = B, max(used) + 1, sum(used) + extra_blocks
        pool, self.tables, nxt = rng.permutation(self.N), rng.integers(0, self.N, (len(lengths), self.M)), 0
        for s, n in enumerate(used):
            self.tables[s, :n] = pool[nxt:nxt + n]
            nxt += n
        self.tables = self.tables.astype(np.int32)

    def slot(self, s, position):
        return int(self.tables[s, position // self.B]) * self.B + position % self.B


@pytest.mark.parametrize("cache_dtype,token_dtype", CACHES)
@pytest.mark.parametrize("form", FORMS)
def test_kv_cache_mla_decode_steps_with_one_plan(ctx, rng, form, cache_dtype, token_dtype):
    B, H, layers, steps = 8, 4, 2, 2
    fp8 = cache_dtype.startswith("fp8")
    scale = 0.02 if fp8 else 1.0  # tokens in (-1, 1) stored / 0.02: within both fp8 formats
    prefixes = [0, 1, B - 2, B - 1, B, 2 * B + 3]  # decoded to lengths 1, 2, B - 1, B, B + 1, ... then one more
    S = len(prefixes)
    pages = Pages(rng, [p + steps for p in prefixes], B)
    cache = vkpaged.KvCache(ctx, vkpaged.KvCacheShape(
        num_layers=layers, num_kv_heads=1, head_size=DV, block_size=B, dtype=cache_dtype, layout="nhd",
        kind="mla_" + form, rope_head_size=R), num_blocks=pages.N)
    assert cache.shape.kind == "mla_" + form and cache.shape.rope_head_size == R
    views = cache.mla_cache(1)
    assert (views.mla_cache is None) == (form == "two_pools") and (views.kpe_cache is None) == (form == "one_pool")
    cos_sin = vkpaged.rotary_cos_sin_cache(64, R)
    d_cos_sin = ctx.tensor_from(cos_sin)
    cmd = vkpaged.CommandBuffer(ctx)

    def write(layer, slots, positions):
        """New tokens into a layer, RoPE (NeoX) on k_pe; checks the rows against the float64 write."""
        kv_c, k_pe, want = new_tokens(rng, len(slots), token_dtype, positions, cos_sin.astype(np.float64), "neox")
        before = rows_of(cache.mla_cache(layer), form)
        cache.record_mla_reshape_and_cache(
            cmd, layer, kv_c=ctx.tensor_from(kv_c, dtype=token_dtype), k_pe=ctx.tensor_from(k_pe, dtype=token_dtype),
            slot_mapping=ctx.tensor_from(np.asarray(slots, np.int64)),
            positions=ctx.tensor_from(np.asarray(positions, np.int64)), cos_sin_cache=d_cos_sin, scale=scale)
        cmd.submit()
        expect_written(before, rows_of(cache.mla_cache(layer), form), np.asarray(slots), want, cache_dtype, scale)

    # The cached prefixes, with a padding token (slot -1) among them.
    prefill = [(s, p) for s, prefix in enumerate(prefixes) for p in range(prefix)]
    slots = [pages.slot(s, p) for s, p in prefill] + [-1]
    for layer in range(layers):
        write(layer, slots, [p for _, p in prefill] + [0])

    # One plan for every decode step: the same query starts, lengths read on the device.
    starts = np.arange(S + 1, dtype=np.int32)
    plan = vkpaged.MlaPlan(ctx, cache.mla_shape(vkpaged.AttentionShape(
        num_requests=S, num_query_tokens=S, num_heads=H, max_blocks_per_seq=pages.M, query_dtype=token_dtype,
        lse=True)), starts)
    assert plan.shape.value_head_size == DV and plan.shape.cache_form == form
    assert plan.shape.attention.head_size == DV + R and plan.shape.attention.num_blocks == pages.N
    tables, d_starts = ctx.tensor_from(pages.tables), ctx.tensor_from(starts)
    lens = ctx.create_buffer(4 * S, host_visible=True).tensor("i32", [S])
    queries = [ctx.create_buffer(S * H * (DV + R) * 4, host_visible=True).tensor(token_dtype, [S, H, DV + R])
               for _ in range(layers)]
    outputs = [ctx.create_buffer(S * H * DV * 4).tensor(token_dtype, [S, H, DV]) for _ in range(layers)]
    lses = [ctx.create_buffer(S * H * 4).tensor("f32", [S, H]) for _ in range(layers)]
    scratch = ctx.create_buffer(max(plan.scratch_bytes, 16)).view() if plan.scratch_bytes else None
    for step in range(steps):
        positions = [p + step for p in prefixes]
        for layer in range(layers):
            write(layer, [pages.slot(s, p) for s, p in enumerate(positions)], positions)
        lengths = np.asarray(positions, np.int32) + 1
        lens.write(lengths)
        q_values = []
        for layer in range(layers):
            query, q = store(rng, rng.uniform(-1, 1, (S, H, DV + R)), token_dtype)
            queries[layer].write(query)
            q_values.append(q)
            cache.record_mla_attention(cmd, layer, plan, query=queries[layer], block_tables=tables,
                                       context_lens=lens, query_starts=d_starts, output=outputs[layer],
                                       lse=lses[layer], scratch=scratch, k_scale=scale, v_scale=scale)
            cmd.barrier()  # the layers share the scratch
        cmd.submit()
        for layer in range(layers):
            with np.errstate(invalid="ignore"):  # rows never written hold what the memory held: NaN patterns too
                rows = stored_values(rows_of(cache.mla_cache(layer), form), cache_dtype, scale)
            want_out, want_lse = mla_attention(q_values[layer], rows, DV, pages.tables, lengths, starts)
            check_attention(outputs[layer].read(), lses[layer].read(), want_out, want_lse, token_dtype)


@pytest.mark.parametrize("form,cache_dtype,token_dtype", [("two_pools", "f16", "f16"), ("one_pool", "bf16", "bf16"),
                                                          ("two_pools", "fp8_e4m3", "f16")])
def test_engine_pools_chunk_written_and_attended_in_one_submission(ctx, rng, form, cache_dtype, token_dtype):
    """An engine's own pools: a prompt chunk per request (after cached prefixes) written with RoPE
    (GPT-J pairs) and attended in the same command buffer, through the free functions."""
    B, H = 8, 2
    fp8 = cache_dtype.startswith("fp8")
    scale = 0.02 if fp8 else 1.0
    requests = [(0, 5), (1, B), (B - 1, 2), (B + 1, 1)]  # (prefix, chunk)
    lengths = [p + q for p, q in requests]
    pages = Pages(rng, lengths, B)
    element = {"f16": 2, "bf16": 2, "fp8_e4m3": 1}[cache_dtype]
    shapes = {"mla_cache": [pages.N, B, DV + R]} if form == "one_pool" else {
        "ckv_cache": [pages.N, B, DV], "kpe_cache": [pages.N, B, R]}
    pools = {name: ctx.create_buffer(int(np.prod(shape)) * element).tensor(cache_dtype, shape)
             for name, shape in shapes.items()}
    for pool in pools.values():  # the engine's own pools start zeroed, its rows past each length included
        pool.write(np.zeros(pool.shape, {"f16": np.float16, "bf16": np.uint16, "fp8_e4m3": np.uint8}[cache_dtype]))
    cos_sin = vkpaged.rotary_cos_sin_cache(64, R, dtype="f32")
    cmd = vkpaged.CommandBuffer(ctx)

    def read_rows():
        if form == "one_pool":
            return pools["mla_cache"].read()
        return np.concatenate([pools["ckv_cache"].read(), pools["kpe_cache"].read()], axis=-1)

    # Every position of every request, the prefixes' and the chunks', written in one call.
    tokens = [(s, p) for s, L in enumerate(lengths) for p in range(L)]
    positions = [p for _, p in tokens]
    slots = np.asarray([pages.slot(s, p) for s, p in tokens], np.int64)
    kv_c, k_pe, want_rows = new_tokens(rng, len(tokens), token_dtype, positions, cos_sin.astype(np.float64), "gptj")
    before = read_rows()
    vkpaged.record_mla_reshape_and_cache(
        cmd, kv_c=ctx.tensor_from(kv_c, dtype=token_dtype), k_pe=ctx.tensor_from(k_pe, dtype=token_dtype),
        slot_mapping=ctx.tensor_from(slots), positions=ctx.tensor_from(np.asarray(positions, np.int32)),
        cos_sin_cache=ctx.tensor_from(cos_sin), rotary_style="gptj", scale=scale, **pools)
    cmd.barrier()
    starts = np.concatenate([[0], np.cumsum([q for _, q in requests])]).astype(np.int32)
    T = int(starts[-1])
    query, q = store(rng, rng.uniform(-1, 1, (T, H, DV + R)), token_dtype)
    shape = vkpaged.AttentionShape(num_requests=len(requests), num_query_tokens=T, num_heads=H, num_kv_heads=1,
                                   head_size=DV + R, block_size=B, num_blocks=pages.N, max_blocks_per_seq=pages.M,
                                   query_dtype=token_dtype, cache_dtype=cache_dtype, kv_layout="nhd", lse=True)
    plan = vkpaged.MlaPlan(ctx, vkpaged.MlaShape(shape, value_head_size=DV, cache_form=form), starts)
    output, lse = ctx.create_buffer(T * H * DV * 4).tensor(token_dtype, [T, H, DV]), ctx.create_buffer(
        T * H * 4).tensor("f32", [T, H])
    vkpaged.record_mla_attention(
        cmd, plan, query=ctx.tensor_from(query, dtype=token_dtype), block_tables=ctx.tensor_from(pages.tables),
        context_lens=ctx.tensor_from(np.asarray(lengths, np.int32)), query_starts=ctx.tensor_from(starts),
        output=output, lse=lse, scratch=ctx.create_buffer(plan.scratch_bytes).view() if plan.scratch_bytes else None,
        k_scale=scale, v_scale=scale, **pools)
    cmd.submit()
    rows = read_rows()
    expect_written(before, rows, slots, want_rows, cache_dtype, scale)
    want_out, want_lse = mla_attention(q, stored_values(rows, cache_dtype, scale), DV, pages.tables, lengths, starts)
    check_attention(output.read(), lse.read(), want_out, want_lse, token_dtype)


def test_refusals_name_the_argument(ctx):
    mla = vkpaged.KvCache(ctx, vkpaged.KvCacheShape(num_kv_heads=1, head_size=DV, block_size=16, layout="nhd",
                                                    kind="mla_two_pools", rope_head_size=R), num_blocks=4)
    kv = vkpaged.KvCache(ctx, vkpaged.KvCacheShape(num_kv_heads=1, head_size=DV, block_size=16), num_blocks=4)
    batch = vkpaged.AttentionShape(num_requests=1, num_query_tokens=1, num_heads=4, max_blocks_per_seq=1)
    with pytest.raises(vkpaged.InvalidArgumentError, match="mla_shape: the cache holds key and value pools"):
        kv.mla_shape(batch)
    with pytest.raises(vkpaged.InvalidArgumentError, match="mla_cache: the cache holds key and value pools"):
        kv.mla_cache(0)
    with pytest.raises(vkpaged.InvalidArgumentError, match="host_mla_cache: the cache has no host pool"):
        mla.host_mla_cache(0)
    with pytest.raises(vkpaged.InvalidArgumentError, match="kind: 'mla' is not one of key_value, mla_one_pool"):
        vkpaged.KvCacheShape(kind="mla")
    with pytest.raises(vkpaged.InvalidArgumentError, match="cache_form: 'one' is not one of one_pool, two_pools"):
        vkpaged.MlaShape(batch, cache_form="one")
    with pytest.raises(vkpaged.InvalidArgumentError, match="rope_head_size R = 0"):
        vkpaged.KvCache(ctx, vkpaged.KvCacheShape(num_kv_heads=1, head_size=DV, layout="nhd", kind="mla_one_pool"),
                        num_blocks=4)
    shape = mla.mla_shape(batch)
    assert shape.rope_head_size == R and shape.cache_form == "two_pools"
    plan = vkpaged.MlaPlan(ctx, shape, [0, 1])
    shape.attention.num_blocks = 3
    small = vkpaged.MlaPlan(ctx, shape, [0, 1])
    views = dict(query=ctx.create_buffer(1024).tensor("f16", [1, 4, DV + R]),
                 block_tables=ctx.tensor_from(np.zeros((1, 1), np.int32)),
                 context_lens=ctx.tensor_from(np.ones(1, np.int32)),
                 query_starts=ctx.tensor_from(np.array([0, 1], np.int32)),
                 output=ctx.create_buffer(1024).tensor("f16", [1, 4, DV]))
    cmd = vkpaged.CommandBuffer(ctx)
    with pytest.raises(vkpaged.InvalidArgumentError, match="num_blocks 3, the cache's is 4"):
        mla.record_mla_attention(cmd, 0, small, **views)
    with pytest.raises(vkpaged.InvalidArgumentError, match="layer 1 is outside"):
        mla.record_mla_attention(cmd, 1, plan, **views)
    with pytest.raises(vkpaged.InvalidArgumentError, match="positions: needed with cos_sin_cache"):
        mla.record_mla_reshape_and_cache(cmd, 0, kv_c=views["query"], k_pe=views["query"],
                                         slot_mapping=views["context_lens"], cos_sin_cache=views["query"])
    with pytest.raises(vkpaged.InvalidArgumentError, match="query_starts: missing"):
        vkpaged.mla_attention(ctx, np.zeros((1, 4, DV + R), np.float16), np.zeros((1, 1), np.int32),
                              np.ones(1, np.int32), ckv_cache=np.zeros((4, 16, DV), np.float16),
                              kpe_cache=np.zeros((4, 16, R), np.float16))
    with pytest.raises(vkpaged.InvalidArgumentError, match="mla_cache: a uint8 array: say cache_dtype"):
        vkpaged.mla_attention(ctx, np.zeros((1, 4, DV + R), np.float16), np.zeros((1, 1), np.int32),
                              np.ones(1, np.int32), np.array([0, 1], np.int32),
                              mla_cache=np.zeros((4, 16, DV + R), np.uint8), value_head_size=DV)
    cmd.discard()
