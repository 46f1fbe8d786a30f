#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""vkpaged from Python through the `vkpaged` package (python/README.md): an engine's start-up and
replayed steps. At start-up the Context builds every pipeline of the engine's bucket at once
(Context.prepare), from the last run's pipeline cache where --pipeline-cache names a saved one,
and saves it there after. One step of the bucket (new keys and values into the paged KvCache, then
attention of every request) is recorded once and ended; each step then rewrites only the device
arrays (slots, queries, FlashInfer's CSR page tables from the BlockManager, query starts, padded
to the bucket) and submits the same recording: prompts, then decode tokens beside a new prompt,
then decode tokens alone. Each step's output is checked against the math written out in NumPy.
Prints one line; exits non-zero on a mismatch.

    python3 replay_step.py [--device INDEX|NAME] [--layout vllm|nhd|hnd] [--pipeline-cache FILE]
"""
import argparse
import os
import sys
import time

import numpy as np

import vkpaged

HEADS, KV_HEADS, HEAD_SIZE, BLOCK_SIZE, MAX_BLOCKS = 8, 2, 64, 16, 4
REQUESTS, TOKENS, LONGEST = 4, 32, 16  # the bucket: most requests, new tokens, new tokens of one request


def attend(q, keys, values):
    """Causal attention of a request's new queries q [n, H, D] over its keys/values [L, Hkv, D]."""
    n, L, out = len(q), len(keys), np.zeros_like(q)
    for j in range(n):
        for h in range(HEADS):
            g = h // (HEADS // KV_HEADS)
            logits = keys[:L - n + j + 1, g] @ q[j, h] / np.sqrt(HEAD_SIZE)
            p = np.exp(logits - logits.max())
            out[j, h] = p @ values[:L - n + j + 1, g] / p.sum()
    return out


class ReplayedStep:
    def __init__(self, ctx, cache, plan):
        def array(dtype, shape):  # host-visible: each step rewrites it with a plain copy
            nbytes = int(np.prod(shape)) * vkpaged.dtype_size(dtype)
            return ctx.create_buffer(nbytes, host_visible=True).tensor(dtype, shape)

        T, S = TOKENS, REQUESTS
        self.q, self.k, self.v = (array("f16", (T, h, HEAD_SIZE)) for h in (HEADS, KV_HEADS, KV_HEADS))
        self.out = array("f16", (T, HEADS, HEAD_SIZE))
        self.slots, self.starts = array("i64", (T,)), array("i32", (S + 1,))
        self.csr = dict(kv_indptr=array("i32", (S + 1,)), kv_indices=array("i32", (S * MAX_BLOCKS,)),
                        kv_last_page_len=array("i32", (S,)))
        scratch = ctx.create_buffer(plan.scratch_bytes).view()  # the CSR expansion's room, at least
        self.cmd = vkpaged.CommandBuffer(ctx)
        self.cmd.barrier()  # each replay after the previous one
        cache.record_reshape_and_cache(self.cmd, 0, key=self.k, value=self.v, slot_mapping=self.slots)
        self.cmd.barrier()  # the cache writes before the attention reads them
        cache.record_attention(self.cmd, 0, plan, query=self.q, query_starts=self.starts, output=self.out,
                               scratch=scratch, **self.csr)
        self.cmd.end()  # recorded once: every submit() replays it

    def run(self, blocks, requests, q, k, v):
        """requests: (sequence, first new token, count), at most the bucket's; padded to it."""
        pad = lambda a, size, value: np.concatenate([a, np.full((size - len(a),) + a.shape[1:], value, a.dtype)])
        T = len(q)
        self.q.write(pad(q, TOKENS, 0))
        self.k.write(pad(k, TOKENS, 0))
        self.v.write(pad(v, TOKENS, 0))
        self.slots.write(pad(np.concatenate([blocks.slot_mapping(s, f, c) for s, f, c in requests]), TOKENS, -1))
        self.starts.write(pad(np.cumsum([0] + [c for _, _, c in requests], dtype=np.int32), REQUESTS + 1, T))
        tables = [blocks.block_table(s) for s, _, _ in requests]
        lens = np.array([f + c for _, f, c in requests])
        self.csr["kv_indptr"].write(pad(np.cumsum([0] + [len(t) for t in tables], dtype=np.int32), REQUESTS + 1,
                                        sum(len(t) for t in tables)))
        self.csr["kv_indices"].write(pad(np.concatenate(tables), REQUESTS * MAX_BLOCKS, 0))
        last = lens - (np.array([len(t) for t in tables]) - 1) * BLOCK_SIZE
        self.csr["kv_last_page_len"].write(pad(last.astype(np.int32), REQUESTS, 0))
        self.cmd.submit()
        return self.out.read()[:T].astype(np.float64)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="", help="index or name substring (default: VKPAGED_DEVICE, else the "
                                                     "first discrete GPU, integrated, virtual, CPU)")
    parser.add_argument("--layout", default="vllm", choices=["vllm", "nhd", "hnd"])
    parser.add_argument("--pipeline-cache", help="a file to load the pipeline cache from (if it exists) and save to")
    args = parser.parse_args()
    ctx = vkpaged.Context(int(args.device) if args.device.isdigit() else args.device, read_environment=True)
    cache = vkpaged.KvCache(ctx, vkpaged.KvCacheShape(num_kv_heads=KV_HEADS, head_size=HEAD_SIZE,
                                                      block_size=BLOCK_SIZE, layout=args.layout), num_blocks=32)
    bucket = cache.attention_shape(vkpaged.AttentionShape(num_requests=REQUESTS, num_query_tokens=TOKENS,
                                                          num_heads=HEADS, max_blocks_per_seq=MAX_BLOCKS,
                                                          csr_page_table=True))

    # Start-up: every pipeline of the bucket and the cache write at once, from the saved cache.
    if args.pipeline_cache and os.path.exists(args.pipeline_cache):
        try:
            with open(args.pipeline_cache, "rb") as f:
                ctx.load_pipeline_cache(f.read())
        except vkpaged.InvalidArgumentError as e:  # another device or driver, or damaged: built afresh
            print(f"pipeline cache not used: {e}", file=sys.stderr)
    start = time.monotonic()
    report = ctx.prepare(attention=[vkpaged.AttentionBucket(bucket, LONGEST)],
                         cache_writes=[vkpaged.CacheWriteKind.of(cache, "f16")])
    prepared = time.monotonic() - start
    if args.pipeline_cache:
        with open(args.pipeline_cache, "wb") as f:
            f.write(ctx.pipeline_cache_data())
    step = ReplayedStep(ctx, cache, vkpaged.AttentionPlan.create_bucket(ctx, bucket, LONGEST))

    blocks, rng, history, error = vkpaged.BlockManager(cache.num_blocks, BLOCK_SIZE), np.random.default_rng(0), {}, 0.0
    blocks.add_sequence(1, list(range(100, 112)))  # 12-token and 16-token prompts
    blocks.add_sequence(2, list(range(200, 216)))
    schedule = [[(1, 0, 12), (2, 0, 16)], [(1, 12, 1), (3, 0, 9), (2, 16, 1)], [(3, 9, 1), (1, 13, 1)]]
    for i, requests in enumerate(schedule):
        if i == 1:
            blocks.add_sequence(3, list(range(300, 309)))
        for seq, first, _ in requests:
            if first == blocks.context_len(seq):  # a decode token: the sequence grows first
                blocks.append_token(seq, first)
        T = sum(c for _, _, c in requests)
        q, k, v = (rng.uniform(-1, 1, (T, h, HEAD_SIZE)).astype(np.float16) for h in (HEADS, KV_HEADS, KV_HEADS))
        got = step.run(blocks, requests, q, k, v)
        start = 0
        for seq, first, count in requests:
            rows = slice(start, start + count)
            keys, values = history.get(seq, (np.zeros((0, KV_HEADS, HEAD_SIZE)),) * 2)
            history[seq] = (np.concatenate([keys[:first], k[rows]]), np.concatenate([values[:first], v[rows]]))
            want = attend(q[rows].astype(np.float64), *history[seq])
            error = max(error, float(np.abs(got[rows] - want).max()))
            start += count
    ok = error <= 3e-3  # docs/contract.md's f16 tolerance
    print(f"python replayed steps: {ctx.device_info.name}, {args.layout} layout, one recording for {len(schedule)} "
          f"steps ({report.pipelines} pipelines prepared in {prepared:.1f} s): max |error| {error:.1e} "
          f"{'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
