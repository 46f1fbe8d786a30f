# SPDX-License-Identifier: Apache-2.0
"""Replay (docs/integration.md, "Replaying a recorded step"): a bucket's plan
(AttentionPlan.create_bucket) serves every step inside the bucket, so one recording is ended and
submitted for each step while the host rewrites only the device arrays in between: new keys and
values and their slots, queries, block tables (dense or CSR), context lengths, query starts.
Each step pads itself to the bucket; each replay's output is checked against contract_math.py
over the pools read back."""
import numpy as np
import pytest

import vkpaged
from contract_math import TOLERANCE, as_nhbd, attention, stored_values
from steps import csr_of

H, HKV, D, B = 4, 2, 32, 4
M = 6  # block-table columns: contexts of up to 24 positions
N = 4 * M + 2


class ReplayedStep:
    """A bucket's device arrays (host-visible: each step rewrites them with plain copies) and one
    recording of the step over them: the new tokens into the cache, then attention."""

    def __init__(self, ctx, cache, plan, csr):
        shape = plan.shape
        self.S, self.T, self.csr = shape.num_requests, shape.num_query_tokens, csr
        S, T = self.S, self.T

        def array(dtype, dims):
            nbytes = int(np.prod(dims)) * vkpaged.dtype_size(dtype)
            return ctx.create_buffer(nbytes, host_visible=True).tensor(dtype, dims)

        self.query, self.output = array("f16", (T, H, D)), array("f16", (T, H, D))
        self.key, self.value = array("f16", (T, HKV, D)), array("f16", (T, HKV, D))
        self.slots, self.starts = array("i64", (T,)), array("i32", (S + 1,))
        if csr:  # kv_indices sized for the bucket's largest step
            self.pages = dict(kv_indptr=array("i32", (S + 1,)), kv_indices=array("i32", (S * M,)),
                              kv_last_page_len=array("i32", (S,)))
        else:
            self.pages = dict(block_tables=array("i32", (S, M)), context_lens=array("i32", (S,)))
        # Allocated before the plan, as an engine does for all its buckets.
        scratch_bytes = vkpaged.AttentionPlan.max_scratch_bytes(ctx, shape, plan.max_query_tokens)
        assert scratch_bytes == plan.scratch_bytes
        scratch = ctx.create_buffer(scratch_bytes).view() if scratch_bytes else None
        self.status = ctx.tensor_from(np.zeros(1, np.uint32))

        self.cmd = vkpaged.CommandBuffer(ctx)
        self.cmd.barrier()  # each replay after the previous one's writes
        cache.record_reshape_and_cache(self.cmd, 0, key=self.key, value=self.value, slot_mapping=self.slots,
                                       status=self.status.memory)
        self.cmd.barrier()
        cache.record_attention(self.cmd, 0, plan, query=self.query, query_starts=self.starts, output=self.output,
                               scratch=scratch, status=self.status.memory, **self.pages)
        self.cmd.end()

    def run(self, step):
        """Writes the step padded to the bucket (its requests, then requests of no new tokens and
        length 0; its tokens, then tokens of no slot) and replays the recording."""
        t = len(step["slots"])
        pad = lambda a, size, value: np.concatenate([a, np.full((size - len(a),) + a.shape[1:], value, a.dtype)])
        self.query.write(pad(step["query"], self.T, 0))
        self.key.write(pad(step["key"], self.T, 0))
        self.value.write(pad(step["value"], self.T, 0))
        self.slots.write(pad(step["slots"], self.T, -1))
        self.starts.write(pad(step["starts"], self.S + 1, t))
        lens = pad(step["lens"], self.S, 0)
        if self.csr:
            indptr, indices, last = csr_of(pad(step["tables"], self.S, 0), lens, B)
            self.pages["kv_indptr"].write(indptr)
            self.pages["kv_indices"].write(pad(indices, self.S * M, 0))
            self.pages["kv_last_page_len"].write(last)
        else:
            self.pages["block_tables"].write(pad(step["tables"], self.S, 0))
            self.pages["context_lens"].write(lens)
        self.cmd.submit()
        assert self.status.read()[0] == 0 and self.cmd.ended
        return self.output.read()[:t]


def random_step(rng, requests):
    """(cached prefix, new tokens) per request: distinct blocks for every request (so the new
    tokens' slots never collide), the new tokens at the last positions of each context."""
    blocks = rng.permutation(N)
    tables = np.zeros((len(requests), M), np.int32)
    slots, lens, starts = [], [], [0]
    for s, (prefix, q) in enumerate(requests):
        L = prefix + q
        tables[s, :(L + B - 1) // B] = blocks[s * M:s * M + (L + B - 1) // B]
        slots += [tables[s, p // B] * B + p % B for p in range(prefix, L)]
        lens.append(L)
        starts.append(starts[-1] + q)
    T = starts[-1]
    new = lambda heads: rng.uniform(-1, 1, (T, heads, D)).astype(np.float16)
    return dict(tables=tables, lens=np.array(lens, np.int32), starts=np.array(starts, np.int32),
                slots=np.array(slots, np.int64), query=new(H), key=new(HKV), value=new(HKV))


def check(cache, step, got):
    k, v = as_nhbd(cache.layout, stored_values(cache.key_cache(0).read(), "f16"),
                   stored_values(cache.value_cache(0).read(), "f16"))
    block, offset = step["slots"] // B, step["slots"] % B
    np.testing.assert_array_equal(k[block, :, offset, :], step["key"].astype(np.float64))  # the new keys landed
    want, _ = attention(step["query"].astype(np.float64), k, v, step["tables"], step["lens"], step["starts"])
    np.testing.assert_allclose(got.astype(np.float64), want, atol=TOLERANCE["f16"], rtol=0)


def make_cache(ctx, rng, layout):
    cache = vkpaged.KvCache(ctx, vkpaged.KvCacheShape(num_kv_heads=HKV, head_size=D, block_size=B, layout=layout),
                            num_blocks=N)
    for view in (cache.key_cache(0), cache.value_cache(0)):  # the prefixes' keys and values
        view.write(rng.uniform(-1, 1, view.shape).astype(np.float16))
    return cache


@pytest.mark.parametrize("layout", ["nhd", "vllm"])
def test_one_recording_replays_mixed_steps_of_its_bucket(ctx, rng, layout):
    cache = make_cache(ctx, rng, layout)
    S, T, longest = 4, 16, 8  # the bucket: requests, new tokens, longest request
    plan = vkpaged.AttentionPlan.create_bucket(ctx, cache.attention_shape(vkpaged.AttentionShape(
        num_requests=S, num_query_tokens=T, num_heads=H, max_blocks_per_seq=M)), longest)
    assert plan.bucket and plan.max_query_tokens == longest and plan.kernel != "decode"
    replay = ReplayedStep(ctx, cache, plan, csr=False)
    for requests in ([(0, 8), (10, 5), (3, 1), (20, 2)],  # the whole bucket
                     [(5, 3), (23, 1)],                   # fewer requests and tokens
                     [(0, 1)],
                     [(2, 8), (0, 7)],
                     [(12, 1), (4, 1), (0, 1)]):          # decode tokens, on the attention kernels
        step = random_step(rng, requests)
        check(cache, step, replay.run(step))


def test_one_recording_replays_decode_steps_with_csr_page_tables(ctx, rng):
    cache = make_cache(ctx, rng, "hnd")
    S = 4
    shape = cache.attention_shape(vkpaged.AttentionShape(num_requests=S, num_query_tokens=S, num_heads=H,
                                                         max_blocks_per_seq=M, csr_page_table=True))
    plan = vkpaged.AttentionPlan.create_bucket(ctx, shape, 1)
    assert plan.bucket and plan.kernel == "decode"
    replay = ReplayedStep(ctx, cache, plan, csr=True)
    for requests in ([(7, 1), (0, 1), (22, 1), (12, 1)], [(3, 1), (15, 1)], [(23, 1)], [(1, 1), (8, 1), (4, 1)]):
        step = random_step(rng, requests)
        check(cache, step, replay.run(step))


def test_an_ended_recording_refuses_records_until_discarded(ctx, rng):
    positions = np.arange(4)
    key_host = rng.uniform(-1, 1, (4, HKV, D)).astype(np.float32)
    key = ctx.tensor_from(key_host)
    rotary = dict(key=key, positions=ctx.tensor_from(positions),
                  cos_sin_cache=ctx.tensor_from(vkpaged.rotary_cos_sin_cache(8, D)))
    cmd = vkpaged.CommandBuffer(ctx)
    vkpaged.record_rotary_embedding(cmd, **rotary)
    assert not cmd.ended
    cmd.end()
    assert cmd.ended
    with pytest.raises(vkpaged.InvalidArgumentError, match=r"cmd: the recording was ended"):
        vkpaged.record_rotary_embedding(cmd, **rotary)
    with pytest.raises(vkpaged.InvalidArgumentError, match=r"cmd: the recording was ended"):
        cmd.end()
    _, once = vkpaged.rotary_embedding(ctx, None, key_host, positions, vkpaged.rotary_cos_sin_cache(8, D))
    cmd.submit()
    np.testing.assert_array_equal(key.read(), once)
    cmd.submit()  # the same recording again: rotated twice
    _, twice = vkpaged.rotary_embedding(ctx, None, once, positions, vkpaged.rotary_cos_sin_cache(8, D))
    np.testing.assert_array_equal(key.read(), twice)
    cmd.discard()
    assert not cmd.ended
    cmd.submit()  # an empty recording
    np.testing.assert_array_equal(key.read(), twice)
