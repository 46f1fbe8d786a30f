# SPDX-License-Identifier: Apache-2.0
"""MLA decode anchors on a CUDA GPU: PyTorch over contiguous latent K/V, for the cases of
`vkpaged bench --suite mla` (tools/vkpaged/bench_mla.cpp).

DeepSeek's absorbed decode: per request one new token with H query heads of Dk = 576 (512 latent
+ 64 rope) against the request's L cached rows K [L, 576] of ONE shared latent head; the values
are the rows' first 512 entries (V = K[..., :512], a view, not a copy). Output [S, H, 512]. bf16
queries; the cache bf16, or fp8 E4M3 with a scale (no PyTorch attention takes fp8 K/V: those
cases dequantize to bf16 inside the timed graph, and say so). The scale is DeepSeek-V3's,
1/sqrt(192) times the YaRN mscale squared, as in the bench.

Backends, each tried and reported (a refusal is a row saying why):
  efficient     SDPA's memory-efficient kernel (torch.nn.attention.sdpa_kernel), two layouts:
                "heads-as-queries" (q [S, 1, H, 576]: the H heads as H query rows of one head, so
                that K is read once per request) and "gqa" (q [S, H, 1, 576], enable_gqa)
  cudnn         SDPA's cuDNN kernel, the same two layouts (cuDNN takes Dk = 576 only where its
                version does)
  flash         SDPA's FlashAttention-2 (head size at most 256: expected to refuse 576)
  matmul        the composition: scores = q @ K^T [S, H, L] in bf16 with f32 accumulation,
                softmax in f32, (P in bf16) @ V: every K row read once per request for all heads,
                the reference the others are checked against (max abs difference)

Timing as bench/torch_cudnn_back_to_back.py's anchor: a CUDA graph of CALLS calls replayed between
two events, divided by CALLS, median of ROUNDS (kernel time, no host in between). For cases whose
cache is under the L2 (60 MB on an H200) also "flushed": the graph of CALLS x [flush, call] minus
the graph of CALLS x [flush], so that the rows come from memory as with vkpaged's
--flush-caches. FLOPs = 2 x H x (576 + 512) per cached token per request, as the bench counts.

--suite mla-prefill: target 14's anchor for `vkpaged bench --suite mla-prefill` (prefills and
chunks after a cached prefix, 16 and 128 heads). Engines prefill MLA unabsorbed: the latents
up-projected to per-head keys of 192 (128 + 64 rope) and values of 128, then FlashAttention. So
each shape is timed as SDPA over q [S, H, q, 192], K [S, H, L, 192], V [S, H, L, 128] (bf16,
contiguous, the up-projection not timed), causal with the new tokens the last of L: flash
(FlashAttention-2, which needs V as wide as K: V zero-padded to 192 as vLLM pads it, the output
sliced), efficient and cudnn (V 128). FLOPs = 2 x H x (192 + 128) per query token per key it sees
(the model's, padding not counted); the bench counts its absorbed work, 2 x H x (576 + 512), the
same way. One anchor per shape and head count serves the bench's bf16 and fp8 cases. Each
backend's output is compared with the first one's (max abs difference).

Not run where it was written (no CUDA device, no torch): it is run by
`scripts/h200-session.sh mla` and `mla-prefill` on the GPU.
Usage: python3 bench/torch_mla_anchor.py [--suite mla|mla-prefill] [--cases SUBSTRING] [--json FILE]"""
import argparse
import json
import math

import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend

# The anchor's timing, shared with the decode anchor (this script's folder is on sys.path when it
# is run as a script).
# CALLS 20 calls per graph, ROUNDS 15; the flush writes FLUSH_BYTES (twice an H200's L2_BYTES).
from torch_cudnn_back_to_back import CALLS, FLUSH_BYTES, L2_BYTES, ROUNDS, graph_of, time_events
from torch.nn.attention.bias import causal_lower_right

DK, DV = 576, 512
FP8_SCALE = 0.5
SCALE = (0.1 * math.log(40.0) + 1.0) ** 2 / math.sqrt(192.0)


def cases():
    """The bench's `mla` suite, in its order and with its names."""
    rows = []
    for dtype in ("bf16", "fp8_e4m3"):
        for heads in (16, 128):
            for context in (4096, 32768):
                for requests in (1, 8, 32, 128):
                    rows.append((f"r{requests}-{context // 1024}k-h{heads}-{dtype}", requests, context, heads, dtype))
    return rows


def checked_and_timed(entry, fn, reference, diff_key):
    """Runs fn once and times a CUDA graph of CALLS calls of it into entry["graph_us"]; its output's
    max abs difference from reference goes to entry[diff_key]. Returns the reference: fn's output
    where there was none yet. Raises what fn raises (a backend that refuses the shape)."""
    out = fn()
    torch.cuda.synchronize()
    if reference is None:
        reference = out.float()
    else:
        entry[diff_key] = (out.float() - reference).abs().max().item()

    def many():
        for _ in range(CALLS):
            fn()

    entry["graph_us"] = time_events(graph_of(many).replay, ROUNDS, CALLS)
    return reference


# Target 14 (tools/vkpaged/bench_mla.cpp, suite mla-prefill): name, requests, new tokens each,
# context L each (the new tokens included), heads.
PREFILL_SHAPES = [(shape, heads) for heads in (16, 128) for shape in
                  (("p4k", 1, 4096, 4096), ("p8x2k", 8, 2048, 2048), ("chunk4x512+8k", 4, 512, 8704))]
DK_UNABSORBED, DV_UNABSORBED = 192, 128


def prefill_cases():
    return [(f"{name}-h{heads}", requests, new, context, heads) for (name, requests, new, context), heads in PREFILL_SHAPES]


def measure_prefill(name, requests, new, context, heads):
    """SDPA on the unabsorbed shape of one mla-prefill case, each backend timed as the decode cases are."""
    seen = new * (context - new) + new * (new + 1) // 2  # keys each query token sees, summed
    flops = 2.0 * heads * (DK_UNABSORBED + DV_UNABSORBED) * seen * requests
    bf = torch.bfloat16
    q = torch.randn(requests, heads, new, DK_UNABSORBED, device="cuda", dtype=bf)
    k = torch.randn(requests, heads, context, DK_UNABSORBED, device="cuda", dtype=bf)
    v = torch.randn(requests, heads, context, DV_UNABSORBED, device="cuda", dtype=bf)
    v_padded = F.pad(v, (0, DK_UNABSORBED - DV_UNABSORBED))  # for FlashAttention-2 (not timed)
    causal = {"is_causal": True} if new == context else {"attn_mask": causal_lower_right(new, context)}

    def call(backend, values):
        def run():
            with sdpa_kernel([backend]):
                out = F.scaled_dot_product_attention(q, k, values, scale=SCALE, **causal)
            return out[..., :DV_UNABSORBED]
        return run

    row = {"name": name, "requests": requests, "new_tokens": new, "context": context, "heads": heads,
           "key_width": DK_UNABSORBED, "value_width": DV_UNABSORBED, "flops": flops, "backends": []}
    reference = None
    for label, fn in [("flash (V padded to 192)", call(SDPBackend.FLASH_ATTENTION, v_padded)),
                      ("efficient", call(SDPBackend.EFFICIENT_ATTENTION, v)),
                      ("cudnn", call(SDPBackend.CUDNN_ATTENTION, v))]:
        entry = {"backend": label}
        try:
            reference = checked_and_timed(entry, fn, reference, "max_abs_diff_vs_first")
            entry["tflops"] = flops / entry["graph_us"] / 1e6
        except Exception as ex:  # a backend that refuses the shape (or cannot be captured)
            entry["error"] = f"{type(ex).__name__}: {str(ex)[:160]}"
        row["backends"].append(entry)
    timed = [b for b in row["backends"] if "tflops" in b]
    if timed:
        best = min(timed, key=lambda b: b["graph_us"])
        row["best_backend"], row["best_us"] = best["backend"], best["graph_us"]
    del q, k, v, v_padded
    torch.cuda.empty_cache()
    return row


def sdpa_call(backend, layout, q, k_of):
    """One call of SDPA on `backend`: q [S, H, 576], k_of() -> K [S, L, 576] (bf16)."""
    s, h, _ = q.shape

    def call():
        k = k_of()
        v = k[..., :DV]
        if layout == "heads-as-queries":
            out = F.scaled_dot_product_attention(q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1), scale=SCALE)
            return out.squeeze(1)
        out = F.scaled_dot_product_attention(q.unsqueeze(2), k.unsqueeze(1), v.unsqueeze(1), scale=SCALE,
                                             enable_gqa=True)
        return out.squeeze(2)

    def run():
        with sdpa_kernel([backend]):
            return call()

    return run


def matmul_call(q, k_of):
    def run():
        k = k_of()
        scores = torch.matmul(q, k.transpose(1, 2)).float() * SCALE  # [S, H, L]
        p = torch.softmax(scores, dim=-1).to(q.dtype)
        return torch.matmul(p, k[..., :DV])  # [S, H, 512]

    return run


def measure(name, requests, context, heads, dtype, flush_buffer):
    elem = 1 if dtype == "fp8_e4m3" else 2
    cache_bytes = requests * context * DK * elem
    flops = 2.0 * heads * (DK + DV) * context * requests
    q = (torch.rand(requests, heads, DK, device="cuda", dtype=torch.float32) * 2 - 1).to(torch.bfloat16)
    k16 = (torch.rand(requests, context, DK, device="cuda", dtype=torch.float32) * 2 - 1).to(torch.bfloat16)
    if dtype == "fp8_e4m3":
        k8 = (k16.float() / FP8_SCALE).to(torch.float8_e4m3fn)
        del k16
        k_of = lambda: k8.to(torch.bfloat16) * FP8_SCALE  # dequantized inside the timed call
        note = "fp8 dequantized to bf16 inside the call (no PyTorch attention reads fp8 K/V)"
    else:
        k_of = lambda: k16
        note = ""
    row = {"name": name, "requests": requests, "context": context, "heads": heads, "cache_dtype": dtype,
           "key_width": DK, "value_width": DV, "cache_bytes": cache_bytes, "flops": flops, "note": note,
           "backends": []}
    reference = None
    candidates = [("matmul", matmul_call(q, k_of))]
    for be_name, be in [("efficient", SDPBackend.EFFICIENT_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                        ("flash", SDPBackend.FLASH_ATTENTION)]:
        for layout in ("heads-as-queries", "gqa"):
            candidates.append((f"{be_name} ({layout})", sdpa_call(be, layout, q, k_of)))
    for label, fn in candidates:
        entry = {"backend": label}
        try:
            reference = checked_and_timed(entry, fn, reference, "max_abs_diff_vs_matmul")
            if cache_bytes < L2_BYTES:
                flush = lambda: flush_buffer.fill_(1.0)

                def flushed_calls():
                    for _ in range(CALLS):
                        flush()
                        fn()

                def flushes():
                    for _ in range(CALLS):
                        flush()

                entry["flushed_us"] = (time_events(graph_of(flushed_calls).replay, ROUNDS, CALLS)
                                       - time_events(graph_of(flushes).replay, ROUNDS, CALLS))
            us = entry.get("flushed_us", entry["graph_us"])
            if us > 0:  # a flushed difference lost in the noise gives no rate
                entry["tflops"] = flops / us / 1e6
                entry["cache_gbs"] = cache_bytes / us / 1e3
        except Exception as ex:  # a backend that refuses the shape (or cannot be captured)
            entry["error"] = f"{type(ex).__name__}: {str(ex)[:160]}"
        row["backends"].append(entry)
        torch.cuda.empty_cache()
    timed = [b for b in row["backends"] if "tflops" in b and "error" not in b]
    if timed:
        best = min(timed, key=lambda b: b.get("flushed_us", b["graph_us"]))
        row["best_backend"] = best["backend"]
        row["best_us"] = best.get("flushed_us", best["graph_us"])
    return row


def line(row, entry):
    if "error" in entry:
        return f"{row['name']:22s} {entry['backend']:28s} n/a {entry['error']}"
    text = f"{row['name']:22s} {entry['backend']:28s} graph of {CALLS} {entry['graph_us']:9.1f} us"
    if "flushed_us" in entry:
        text += f" | flushed {entry['flushed_us']:9.1f} us"
    if "tflops" in entry:
        text += " |" + (f" {entry['cache_gbs']:7.0f} GB/s" if "cache_gbs" in entry else "") + f" {entry['tflops']:7.1f} TFLOP/s"
    for key, reference in (("max_abs_diff_vs_matmul", "matmul"), ("max_abs_diff_vs_first", "the first")):
        if key in entry:
            text += f" | max |diff| vs {reference} {entry[key]:.2e}"
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="mla", choices=["mla", "mla-prefill"],
                        help="the bench suite to anchor: mla (decode, absorbed) or mla-prefill (target 14, unabsorbed)")
    parser.add_argument("--cases", default="", help="run only the cases whose name contains this")
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args()
    print("torch", torch.__version__, torch.cuda.get_device_name(), flush=True)
    flush_buffer = torch.zeros(FLUSH_BYTES // 4, device="cuda", dtype=torch.float32)
    if args.suite == "mla-prefill":
        shapes, run, header = prefill_cases(), measure_prefill, {"suite": args.suite}
    else:
        shapes, run, header = cases(), lambda *shape: measure(*shape, flush_buffer), {"fp8_scale": FP8_SCALE}
    rows = []
    for shape in shapes:
        if args.cases not in shape[0]:
            continue
        row = run(*shape)
        rows.append(row)
        for entry in row["backends"]:
            print(line(row, entry), flush=True)
        note = row.get("note")
        print(f"{row['name']:22s} best: {row.get('best_backend', 'none')} "
              f"{row.get('best_us', float('nan')):.1f} us{' (' + note + ')' if note else ''}", flush=True)
        torch.cuda.empty_cache()
        if args.json:  # after every case, so that a run cut short by its timeout keeps what it measured
            with open(args.json, "w") as f:
                json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "calls": CALLS,
                           "rounds": ROUNDS, "scale": SCALE, **header, "rows": rows}, f, indent=1)

if __name__ == "__main__":
    main()
