"""cuDNN SDPA decode timings for vkpaged's standard shapes, three ways, to show how much of
torch_decode_anchor.py's figure is the kernel: (1) as the anchor times it (events around one
call on an idle GPU, so the host's launch is inside), (2) 20 calls back to back between two
events, divided by 20, (3) a CUDA graph of 20 calls replayed between two events, divided by 20.
Usage: python3 bench/torch_cudnn_back_to_back.py"""
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend

SHAPES = [  # name, batch, ctx, q_heads, kv_heads, head
    ("long1", 1, 32768, 32, 8, 128), ("mid8", 8, 4096, 32, 8, 128), ("batch64", 64, 4096, 32, 8, 128),
    ("batch256", 256, 1024, 32, 8, 128), ("mha32", 32, 8192, 32, 32, 128), ("gqa8x", 16, 2048, 64, 8, 128),
    ("d64", 4, 16384, 32, 8, 64)]
CALLS = 20
ROUNDS = 15


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


def main():
    print("torch", torch.__version__, torch.cuda.get_device_name())
    for name, b, ctx, hq, hk, d in SHAPES:
        q = torch.randn(b, hq, 1, d, device="cuda", dtype=torch.float16)
        k = torch.randn(b, hk, ctx, d, device="cuda", dtype=torch.float16)
        v = torch.randn(b, hk, ctx, d, device="cuda", dtype=torch.float16)
        kv_bytes = 2 * b * hk * ctx * d * 2
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            one = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=(hq != hk))
            for _ in range(5):
                one()

            def many():
                for _ in range(CALLS):
                    one()

            single = time_events(one, 50, 1)
            back_to_back = time_events(many, ROUNDS, CALLS)
            try:
                graph = torch.cuda.CUDAGraph()
                stream = torch.cuda.Stream()
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    many()  # warm the capture's allocations
                    torch.cuda.synchronize()
                    with torch.cuda.graph(graph, stream=stream):
                        many()
                torch.cuda.current_stream().wait_stream(stream)
                graphed = time_events(graph.replay, ROUNDS, CALLS)
                graph_text = f"{graphed:8.1f}us ({kv_bytes / graphed / 1e3:6.0f} GB/s)"
            except Exception as ex:  # a backend that cannot be captured
                graph_text = f"n/a ({type(ex).__name__}: {str(ex)[:60]})"
        print(f"{name:9s} KV={kv_bytes / 1e9:.3f}GB: one call {single:8.1f}us | {CALLS} back to back "
              f"{back_to_back:8.1f}us ({kv_bytes / back_to_back / 1e3:6.0f} GB/s) | graph of {CALLS} {graph_text}",
              flush=True)


if __name__ == "__main__":
    main()
