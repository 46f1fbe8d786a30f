# SPDX-License-Identifier: Apache-2.0
"""Start-up: Context.prepare builds every pipeline of an engine's buckets (MLA ones too), decode
plans and cache writes at once, so that the plans made and the writes recorded after it build
none; the Context's pipeline cache, saved as bytes, loads into the next Context; a cache of another device or driver,
or a damaged one, is refused with the library's reason and changes nothing."""
import os
import struct

import numpy as np
import pytest

import vkpaged

H, HKV, D, B, M = 8, 2, 64, 16, 8
S, T, CHUNK = 4, 32, 16  # the buckets: decode steps of S requests, mixed steps of T tokens


def fresh_context():
    """A Context of its own (on the session's device): prepare's counts start from nothing."""
    return vkpaged.Context(validation=os.environ.get("VKPAGED_PYTHON_VALIDATION", "1") != "0",
                           read_environment=True)


def engine_set(cache):
    """An engine's buckets (decode steps, mixed steps, a decode plan) and its cache write."""
    bucket = lambda tokens: cache.attention_shape(vkpaged.AttentionShape(
        num_requests=S, num_query_tokens=tokens, num_heads=H, max_blocks_per_seq=M))
    decode = cache.decode_shape(vkpaged.DecodeShape(num_seqs=S, num_heads=H, max_blocks_per_seq=M))
    return dict(attention=[vkpaged.AttentionBucket(bucket(S), 1), vkpaged.AttentionBucket(bucket(T), CHUNK)],
                decode=[vkpaged.DecodeBucket(decode)],
                cache_writes=[vkpaged.CacheWriteKind.of(cache, "f16", vkpaged.RotaryWrite(D))])


def run_steps(ctx, cache, buckets):
    """Each bucket's step on zeros: the rotary cache write, then attention; and the decode plan."""
    zeros = lambda dtype, shape: ctx.tensor_from(np.zeros(shape, {"f16": np.float16, "i64": np.int64,
                                                                  "i32": np.int32, "f32": np.float32}[dtype]))
    tables, lens = zeros("i32", (S, M)), zeros("i32", (S,))
    with vkpaged.CommandBuffer(ctx) as cmd:
        for bucket in buckets["attention"]:
            plan = vkpaged.AttentionPlan.create_bucket(ctx, bucket.shape, bucket.max_query_tokens)
            t = plan.shape.num_query_tokens
            query, output = zeros("f16", (t, H, D)), zeros("f16", (t, H, D))
            cache.record_reshape_and_cache(cmd, 0, key=zeros("f16", (t, HKV, D)), value=zeros("f16", (t, HKV, D)),
                                           slot_mapping=zeros("i64", (t,)), query=query,
                                           positions=zeros("i64", (t,)), cos_sin_cache=zeros("f32", (M * B, D)))
            cmd.barrier()
            scratch = ctx.create_buffer(plan.scratch_bytes).view() if plan.scratch_bytes else None
            cache.record_attention(cmd, 0, plan, query=query, block_tables=tables, context_lens=lens,
                                   query_starts=zeros("i32", (S + 1,)), output=output, scratch=scratch)
            cmd.barrier()
        plan = vkpaged.DecodePlan(ctx, buckets["decode"][0].shape)
        scratch = ctx.create_buffer(plan.scratch_bytes).view() if plan.scratch_bytes else None
        cache.record_decode(cmd, 0, plan, query=zeros("f16", (S, H, D)), block_tables=tables, context_lens=lens,
                            output=zeros("f16", (S, H, D)), scratch=scratch)


def test_after_prepare_the_steps_build_no_pipeline():
    ctx = fresh_context()
    cache = vkpaged.KvCache(ctx, vkpaged.KvCacheShape(num_kv_heads=HKV, head_size=D, block_size=B), num_blocks=32)
    buckets = engine_set(cache)
    report = ctx.prepare(**buckets)
    # The decode and attention kernels and the rotary cache write at least, all new to this Context.
    assert report.pipelines >= 3 and report.created == report.pipelines
    assert ctx.prepare(**buckets).created == 0  # a second prepare finds them all
    prepared = ctx.pipeline_cache_data()
    run_steps(ctx, cache, buckets)
    # The pipeline cache holds every pipeline the Context built: the steps added none. (Where the
    # driver keeps one: lavapipe's is its 32-byte header alone, and the converse below carries it.)
    assert ctx.pipeline_cache_data() == prepared
    assert ctx.validation_message_count == 0

    # The converse: a Context whose steps ran first had built every pipeline of the set, so the set
    # is what the steps' plans and writes request (prepare plans as they do).
    other = fresh_context()
    cache = vkpaged.KvCache(other, vkpaged.KvCacheShape(num_kv_heads=HKV, head_size=D, block_size=B), num_blocks=32)
    run_steps(other, cache, buckets)
    assert other.prepare(**buckets).created == 0


def test_prepare_refuses_an_entry_naming_it(ctx):
    cache = vkpaged.KvCache(ctx, vkpaged.KvCacheShape(num_kv_heads=HKV, head_size=D, block_size=B), num_blocks=32)
    buckets = engine_set(cache)
    too_long = vkpaged.AttentionBucket(buckets["attention"][1].shape, T + 1)
    with pytest.raises(vkpaged.InvalidArgumentError) as caught:
        ctx.prepare(attention=[buckets["attention"][0], too_long])
    assert str(caught.value) == f"attention[1]: max_query_tokens: {T + 1} exceeds T = num_query_tokens = {T}"
    odd = vkpaged.CacheWriteKind.of(cache, "f16", vkpaged.RotaryWrite(3))
    with pytest.raises(vkpaged.InvalidArgumentError, match=r"^cache_writes\[0\]\.rotary: "):
        ctx.prepare(cache_writes=[odd])


def test_mla_buckets_are_prepared_and_their_plans_then_build_none():
    """An MLA cache's buckets (decode steps; mixed steps, split): MlaPlan.create_bucket's pipelines,
    built by prepare; a Context whose plans came first had built every one of them."""
    def mla_set(ctx):
        cache = vkpaged.KvCache(ctx, vkpaged.KvCacheShape(num_kv_heads=1, head_size=64, block_size=B, layout="nhd",
                                                          kind="mla_one_pool", rope_head_size=16), num_blocks=32)
        bucket = lambda tokens: cache.mla_shape(vkpaged.AttentionShape(
            num_requests=S, num_query_tokens=tokens, num_heads=H, max_blocks_per_seq=M))
        return [vkpaged.MlaBucket(bucket(S), 1), vkpaged.MlaBucket(bucket(T), CHUNK, split="split", partition_tokens=64)]

    ctx = fresh_context()
    buckets = mla_set(ctx)
    report = ctx.prepare(mla=buckets)
    assert report.pipelines >= 3 and report.created == report.pipelines  # two kernels and the split's merge
    assert ctx.prepare(mla=buckets).created == 0
    for bucket in buckets:
        plan = vkpaged.MlaPlan.create_bucket(ctx, bucket.shape, bucket.max_query_tokens, split=bucket.split,
                                             partition_tokens=bucket.partition_tokens)
        assert plan.bucket and plan.max_query_tokens == bucket.max_query_tokens
        assert plan.kernel in ("scalar", "matrix") and bucket.kernel == "auto"
        assert plan.scratch_bytes == vkpaged.MlaPlan.max_scratch_bytes(
            ctx, bucket.shape, bucket.max_query_tokens, split=bucket.split, partition_tokens=bucket.partition_tokens)
    assert buckets[1].split == "split" and plan.scratch_bytes > 0
    assert ctx.validation_message_count == 0

    other = fresh_context()
    buckets = mla_set(other)
    for bucket in buckets:
        vkpaged.MlaPlan.create_bucket(other, bucket.shape, bucket.max_query_tokens, split=bucket.split,
                                      partition_tokens=bucket.partition_tokens)
    assert other.prepare(mla=buckets).created == 0
    scalar = vkpaged.MlaPlan.create_bucket(other, buckets[0].shape, 1, kernel="scalar")
    assert scalar.kernel == "scalar"
    with pytest.raises(vkpaged.InvalidArgumentError, match=r"^kernel: 1 \(MLA runs on"):
        vkpaged.MlaPlan.create_bucket(other, buckets[0].shape, 1, kernel="decode")
    with pytest.raises(vkpaged.InvalidArgumentError) as caught:
        other.prepare(mla=[buckets[0], vkpaged.MlaBucket(buckets[1].shape, T + 1)])
    assert str(caught.value) == f"mla[1]: max_query_tokens: {T + 1} exceeds T = num_query_tokens = {T}"


def test_a_saved_pipeline_cache_loads_into_the_next_context():
    first = fresh_context()
    cache = vkpaged.KvCache(first, vkpaged.KvCacheShape(num_kv_heads=HKV, head_size=D, block_size=B), num_blocks=32)
    buckets = engine_set(cache)
    first.prepare(**buckets)
    blob = first.pipeline_cache_data()
    assert isinstance(blob, bytes) and len(blob) >= 32
    header_size, version, vendor = struct.unpack_from("<III", blob)
    assert (header_size, version, vendor) == (32, 1, first.device_info.vendor_id)

    following = fresh_context()
    following.load_pipeline_cache(blob)
    following.load_pipeline_cache(bytearray(blob))  # any buffer will do
    report = following.prepare(**buckets)  # built from the loaded cache where the driver keeps one
    assert report.created == report.pipelines > 0
    assert following.validation_message_count == 0


def edited(blob, offset, fmt, edit):
    damaged = bytearray(blob)
    (value,) = struct.unpack_from(fmt, damaged, offset)
    struct.pack_into(fmt, damaged, offset, edit(value))
    return bytes(damaged)


def test_a_pipeline_cache_of_another_device_or_driver_or_a_damaged_one_is_refused(ctx):
    good = ctx.pipeline_cache_data()
    device = ctx.device_info.name

    def refusal(blob):
        with pytest.raises(vkpaged.InvalidArgumentError) as caught:
            ctx.load_pipeline_cache(blob)
        return str(caught.value)

    # VkPipelineCacheHeaderVersionOne: headerSize, headerVersion, vendorID, deviceID, pipelineCacheUUID[16].
    why = refusal(edited(good, 8, "<I", lambda v: v ^ 0xFFFF))
    assert why.startswith("pipeline_cache: vendorID ") and f"is not device {device}'s " in why
    assert "(a cache of another device)" in why
    why = refusal(edited(good, 12, "<I", lambda v: v + 1))
    assert why.startswith("pipeline_cache: deviceID ") and "(a cache of another device)" in why
    why = refusal(edited(good, 19, "<B", lambda v: v ^ 0x5A))
    assert "pipeline_cache: pipelineCacheUUID " in why and "a cache of another driver or driver version" in why
    assert refusal(good[:10]) == ("pipeline_cache: 10 bytes are fewer than the 32 of a VkPipelineCacheHeaderVersionOne "
                                  "(not a pipeline cache, or a truncated one)")
    ctx.load_pipeline_cache(good)  # the refusals changed nothing: the Context's own cache still loads
