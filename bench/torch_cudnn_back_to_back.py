# SPDX-License-Identifier: Apache-2.0
"""cuDNN SDPA decode timings, the anchor of performance-targets.md's round 2, for vkpaged's decode
suites (standard, groups, latency, mqa). Each shape is timed three ways: (1) events around one
call on an idle GPU (the host's launch is inside), (2) CALLS calls back to back between two
events, divided by CALLS, (3) a CUDA graph of CALLS calls replayed between two events, divided by
CALLS: the anchor. For inputs smaller than the L2 (60 MB on an H200) a fourth figure, "flushed",
is the graph of CALLS x [flush, decode] minus the graph of CALLS x [flush], divided by CALLS, so
that the decode reads its KV from memory as vkpaged's `--flush-caches` figures do.
Usage: python3 bench/torch_cudnn_back_to_back.py [--suite standard|groups|latency|mqa|all] [--json F]"""
import argparse
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend

# name, batch, ctx, q_heads, kv_heads, head; the suites of tools/vkpaged/bench_suites.cpp
SUITES = {
    "standard": [
        ("long1", 1, 32768, 32, 8, 128), ("mid8", 8, 4096, 32, 8, 128), ("batch64", 64, 4096, 32, 8, 128),
        ("batch256", 256, 1024, 32, 8, 128), ("mha32", 32, 8192, 32, 32, 128), ("gqa8x", 16, 2048, 64, 8, 128),
        ("d64", 4, 16384, 32, 8, 64)],
    # 134 MB of f16 KV, D 128, 2048 tokens, groups 1 to 32 (the last MQA)
    "groups": [
        ("group1", 4, 2048, 32, 32, 128), ("group2", 8, 2048, 32, 16, 128), ("group4", 16, 2048, 32, 8, 128),
        ("group7", 32, 2048, 28, 4, 128), ("group8", 16, 2048, 64, 8, 128), ("group16", 64, 2048, 32, 2, 128),
        ("group32", 128, 2048, 32, 1, 128)],
    # one short sequence (single-user chat), GQA 32/8, D 128
    "latency": [
        ("one512", 1, 512, 32, 8, 128), ("one2048", 1, 2048, 32, 8, 128), ("one8192", 1, 8192, 32, 8, 128),
        ("four2048", 4, 2048, 32, 8, 128)],
}
SUITES["mqa"] = [SUITES["groups"][-1]]
CALLS = 20
ROUNDS = 15
L2_BYTES = 60 * 1024 * 1024
FLUSH_BYTES = 128 * 1024 * 1024  # twice the L2: writing it evicts what the last decode left


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def time_events(fn, rounds, per_round):
    """Median over rounds of the time between two events around fn(), divided by per_round (us)."""
    times = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / per_round)
    return median(times)


def graph_of(fn):
    """A CUDA graph of fn(), captured on a side stream after a warm-up run there."""
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
        torch.cuda.synchronize()
        with torch.cuda.graph(graph, stream=stream):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    return graph


def measure(name, b, ctx, hq, hk, d, flush_buffer):
    q = torch.randn(b, hq, 1, d, device="cuda", dtype=torch.float16)
    k = torch.randn(b, hk, ctx, d, device="cuda", dtype=torch.float16)
    v = torch.randn(b, hk, ctx, d, device="cuda", dtype=torch.float16)
    kv_bytes = 2 * b * hk * ctx * d * 2
    row = {"name": name, "batch": b, "context": ctx, "heads": hq, "kv_heads": hk, "head_size": d,
           "kv_bytes": kv_bytes}
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        one = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=(hq != hk))
        for _ in range(5):
            one()

        def many():
            for _ in range(CALLS):
                one()

        row["one_call_us"] = time_events(one, 50, 1)
        row["back_to_back_us"] = time_events(many, ROUNDS, CALLS)
        try:
            row["graph_us"] = time_events(graph_of(many).replay, ROUNDS, CALLS)
            if kv_bytes < L2_BYTES:
                flush = lambda: flush_buffer.fill_(1.0)

                def flushed_decodes():
                    for _ in range(CALLS):
                        flush()
                        one()

                def flushes():
                    for _ in range(CALLS):
                        flush()

                with_decode = time_events(graph_of(flushed_decodes).replay, ROUNDS, CALLS)
                alone = time_events(graph_of(flushes).replay, ROUNDS, CALLS)
                row["flushed_us"] = with_decode - alone
        except Exception as ex:  # a backend that cannot be captured
            row["graph_error"] = f"{type(ex).__name__}: {str(ex)[:80]}"
    return row


def line(row):
    gbs = lambda us: row["kv_bytes"] / us / 1e3
    text = (f"{row['name']:9s} KV={row['kv_bytes'] / 1e9:.3f}GB: one call {row['one_call_us']:8.1f}us | {CALLS} back "
            f"to back {row['back_to_back_us']:8.1f}us ({gbs(row['back_to_back_us']):6.0f} GB/s) | ")
    if "graph_us" in row:
        text += f"graph of {CALLS} {row['graph_us']:8.1f}us ({gbs(row['graph_us']):6.0f} GB/s)"
    else:
        text += f"graph n/a ({row.get('graph_error', '')})"
    if "flushed_us" in row:
        text += f" | flushed {row['flushed_us']:8.1f}us ({gbs(row['flushed_us']):6.0f} GB/s)"
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="standard", choices=sorted(SUITES) + ["all"])
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args()
    print("torch", torch.__version__, torch.cuda.get_device_name(), flush=True)
    names = ["standard", "groups", "latency"] if args.suite == "all" else [args.suite]
    flush_buffer = torch.zeros(FLUSH_BYTES // 4, device="cuda", dtype=torch.float32)
    rows = []
    for suite in names:
        for shape in SUITES[suite]:
            row = measure(*shape, flush_buffer)
            row["suite"] = suite
            rows.append(row)
            print(line(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
