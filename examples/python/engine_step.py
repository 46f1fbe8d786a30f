#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""vkpaged from Python through the `vkpaged` package (python/README.md): the engine path of one
model layer for two steps. A BlockManager hands out the slots; each step's new keys and values go
into the paged KvCache with rotary embedding fused (the keys rotated on their way in, the queries
in place), then one multi-query attention attends the whole batch: in the second step a decode
request, a prompt chunk after its cached prefix and a new prompt together. Each step's output is
checked against the math written out here in NumPy. Prints one line; exits non-zero on a mismatch.

    python3 engine_step.py [--device INDEX|NAME] [--layout vllm|nhd|hnd]
"""
import argparse
import sys

import numpy as np

import vkpaged

HEADS, KV_HEADS, HEAD_SIZE, BLOCK_SIZE, MAX_BLOCKS = 8, 2, 64, 16, 8
MAX_POSITION = MAX_BLOCKS * BLOCK_SIZE


def rotate_neox(x, positions):
    """Rotary embedding (NeoX style, base 10000) in float64: pairs (i, i + D/2)."""
    half = HEAD_SIZE // 2
    angle = positions[:, None] * 10000.0 ** (-np.arange(half) / half)  # [T, D/2]
    c, s = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


def attend(q, keys, values, scale):
    """Causal attention of a request's new queries q [n, H, D] over its keys/values [L, Hkv, D],
    the queries at the last n positions."""
    n, L = len(q), len(keys)
    out = np.zeros_like(q)
    for j in range(n):
        seen = L - n + j + 1
        for h in range(HEADS):
            g = h // (HEADS // KV_HEADS)
            logits = scale * keys[:seen, g] @ q[j, h]
            p = np.exp(logits - logits.max())
            out[j, h] = p @ values[:seen, g] / p.sum()
    return out


class Engine:
    def __init__(self, ctx, layout):
        self.ctx = ctx
        self.cache = vkpaged.KvCache(ctx, vkpaged.KvCacheShape(num_kv_heads=KV_HEADS, head_size=HEAD_SIZE,
                                                               block_size=BLOCK_SIZE, dtype="f16", layout=layout),
                                     num_blocks=32)
        self.blocks = vkpaged.BlockManager(self.cache.num_blocks, BLOCK_SIZE)
        self.cos_sin = ctx.tensor_from(vkpaged.rotary_cos_sin_cache(MAX_POSITION, HEAD_SIZE))
        self.history = {}  # per sequence: the keys (rotated) and values it holds, for the check
        self.rng = np.random.default_rng(0)

    def step(self, requests):
        """requests: (sequence, first new token, count). Returns the largest error."""
        ctx, T = self.ctx, sum(n for _, _, n in requests)
        slots = np.concatenate([self.blocks.slot_mapping(s, first, n) for s, first, n in requests])
        positions = np.concatenate([np.arange(first, first + n) for _, first, n in requests])
        starts = np.concatenate([[0], np.cumsum([n for _, _, n in requests])]).astype(np.int32)
        lens = np.array([first + n for _, first, n in requests], np.int32)
        tables = np.stack([self.blocks.block_table(s, MAX_BLOCKS) for s, _, _ in requests])
        q, k, v = (self.rng.uniform(-1, 1, (T, h, HEAD_SIZE)).astype(np.float16)
                   for h in (HEADS, KV_HEADS, KV_HEADS))

        # Once per step on the host: the plan (the cache fills in heads, head size, blocks, layout).
        shape = self.cache.attention_shape(vkpaged.AttentionShape(
            num_requests=len(requests), num_query_tokens=T, num_heads=HEADS, max_blocks_per_seq=MAX_BLOCKS,
            max_context_len=int(lens.max()), query_dtype="f16"))
        plan = vkpaged.AttentionPlan(ctx, shape, starts)
        query = ctx.tensor_from(q)
        output = ctx.create_buffer(q.nbytes).tensor("f16", q.shape)
        scratch = ctx.create_buffer(plan.scratch_bytes).view() if plan.scratch_bytes else None
        with vkpaged.CommandBuffer(ctx) as cmd:  # records, then submits and waits on leaving
            self.cache.record_reshape_and_cache(
                cmd, 0, key=ctx.tensor_from(k), value=ctx.tensor_from(v), slot_mapping=ctx.tensor_from(slots),
                query=query, positions=ctx.tensor_from(positions), cos_sin_cache=self.cos_sin)
            cmd.barrier()  # the cache writes before the attention reads them
            self.cache.record_attention(
                cmd, 0, plan, query=query, block_tables=ctx.tensor_from(tables), context_lens=ctx.tensor_from(lens),
                query_starts=ctx.tensor_from(starts), output=output, scratch=scratch)

        # The same step in NumPy: keys and queries rotated, keys and values rounded as the f16
        # cache stores them, each request attending its own history.
        q_rot = rotate_neox(q.astype(np.float64), positions).astype(np.float16).astype(np.float64)
        k_rot = rotate_neox(k.astype(np.float64), positions).astype(np.float16).astype(np.float64)
        got = output.read().astype(np.float64)
        error = 0.0
        for (seq, first, n), a, b in zip(requests, starts[:-1], starts[1:]):
            keys, values = self.history.get(seq, (np.zeros((0, KV_HEADS, HEAD_SIZE)),) * 2)
            keys, values = np.concatenate([keys[:first], k_rot[a:b]]), np.concatenate([values[:first], v[a:b]])
            self.history[seq] = (keys, values)
            want = attend(q_rot[a:b], keys, values, 1.0 / np.sqrt(HEAD_SIZE))
            error = max(error, float(np.abs(got[a:b] - want).max()))
        return error, plan


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="", help="index or name substring (default: VKPAGED_DEVICE, else the "
                                                     "first discrete GPU, integrated, virtual, CPU)")
    parser.add_argument("--layout", default="vllm", choices=["vllm", "nhd", "hnd"])
    args = parser.parse_args()
    ctx = vkpaged.Context(int(args.device) if args.device.isdigit() else args.device, read_environment=True)
    engine = Engine(ctx, args.layout)
    blocks = engine.blocks
    blocks.add_sequence(1, list(range(1000, 1030)))  # a 30-token prompt, all in step 1
    blocks.add_sequence(2, list(range(2000, 2040)))  # a 40-token prompt in two chunks of 24 and 16
    error1, _ = engine.step([(1, 0, 30), (2, 0, 24)])
    blocks.append_token(1, 1030)  # sequence 1 decodes its next token
    blocks.add_sequence(3, list(range(3000, 3011)))  # a new 11-token prompt
    error2, plan = engine.step([(1, 30, 1), (2, 24, 16), (3, 0, 11)])
    error = max(error1, error2)
    ok = error <= 3e-3  # docs/contract.md's f16 tolerance
    print(f"python engine step: {ctx.device_info.name}, {args.layout} layout, 2 steps (prompts; decode + chunk + "
          f"prompt on {plan.kernel} kernels): max |error| {error:.1e} {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
