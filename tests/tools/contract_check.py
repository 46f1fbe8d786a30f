#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""contract_check: `vkpaged attend` against an independent implementation of docs/contract.md.

Its reference is contract_math.py beside it (NumPy, float64, written from the contract alone; it
shares no code with vkpaged), decode being multi-query attention of one token per request: it draws
random configurations, writes them as .npy files, runs the CLI on them and compares the
output within the contract's tolerances. About a third of the cases give their page tables in
FlashInfer's CSR form (--kv-indptr, --kv-indices, --kv-last-page-len), which the reference
reads itself. A few cases are bad inputs, which must give a non-zero exit, one line on stderr
and no output file.

    /usr/bin/python3 contract_check.py path/to/vkpaged [--count N] [--seed S] [--device D]
"""
import argparse
import os
import subprocess
import sys

import numpy as np

from contract_math import ELEMENT_BYTES, as_nhbd, attention, cache_shapes, read_csr, store
from contract_runner import add_common_arguments, attend_problem, output_problems, passed_flags, refusal_problems, run_cases

# ---- random configurations ----

def random_case(rng, index):
    c = {}
    c["dtype"] = rng.choice(["f32", "f16", "f16", "bf16"])
    kv = rng.choice(["auto", "auto", "auto", "fp8_e4m3", "fp8_e5m2"])
    c["kv_dtype"] = kv
    c["head_size"] = int(rng.choice([64, 80, 96, 112, 128, 256]))
    c["block_size"] = int(rng.choice([8, 16, 32]))
    c["kv_heads"] = int(rng.choice([1, 2, 4]))
    c["heads"] = c["kv_heads"] * int(rng.choice([1, 2, 4, 8]))
    S = int(rng.integers(1, 7))
    B = c["block_size"]
    edges = [0, 1, B - 1, B, B + 1]
    long_len = 1500 if index % 7 == 3 else 700  # a few long contexts take the split path
    c["lens"] = [int(rng.choice(edges)) if rng.random() < 0.4 else int(rng.integers(0, long_len)) for _ in range(S)]
    c["scale"] = float(rng.uniform(0.02, 0.3)) if rng.random() < 0.3 else None
    c["softcap"] = float(rng.uniform(0.05, 1.0)) if rng.random() < 0.3 else 0.0
    c["alibi"] = rng.random() < 0.3
    c["sinks"] = rng.random() < 0.3
    c["window"] = int(rng.integers(1, max(c["lens"]) + 20)) if rng.random() < 0.3 else 0
    c["k_scale"] = float(rng.choice([1.0, 0.5, 2.0, 0.125])) if kv != "auto" else 1.0
    c["v_scale"] = float(rng.choice([1.0, 0.25, 4.0])) if kv != "auto" else 1.0
    c["index_dtype"] = rng.choice(["<i4", "<u4", "<i8"])
    c["csr"] = bool(rng.random() < 0.35)  # FlashInfer's page tables instead of the dense ones
    return c


def build_arrays(rng, c):
    """The case's arrays as the files hold them, and float64 views for the reference."""
    S, H, Hkv, D, B = len(c["lens"]), c["heads"], c["kv_heads"], c["head_size"], c["block_size"]
    cache = c["dtype"] if c["kv_dtype"] == "auto" else c["kv_dtype"]
    x = 16 // ELEMENT_BYTES[cache]
    used = [(L + B - 1) // B for L in c["lens"]]
    M = max(used + [1]) + int(rng.integers(0, 3))
    N = sum(used) + int(rng.integers(1, 5))
    files, ref = {}, {}
    files["query"], ref["q"] = store(rng, rng.uniform(-1, 1, (S, H, D)), c["dtype"])
    k_shape, v_shape = cache_shapes("vllm", N, Hkv, D, B, x)
    files["key_cache"], k = store(rng, rng.uniform(-1, 1, k_shape), cache, c["k_scale"])
    files["value_cache"], v = store(rng, rng.uniform(-1, 1, v_shape), cache, c["v_scale"])
    ref["k"], ref["v"] = as_nhbd("vllm", k, v)  # [N, Hkv, B, D]
    pool = rng.permutation(N)
    tables = rng.integers(0, N, (S, M))  # padding columns: any valid block
    nxt = 0
    for s in range(S):
        tables[s, : used[s]] = pool[nxt : nxt + used[s]]
        nxt += used[s]
    if c["csr"]:
        # Each request's pages in order, the last one holding what is left of its length.
        indptr = np.concatenate([[0], np.cumsum(used)]).astype("<i4")
        indices = np.concatenate([tables[s, : used[s]] for s in range(S)] + [np.zeros(0, np.int64)]).astype("<i4")
        last = np.array([0 if u == 0 else L - (u - 1) * B for L, u in zip(c["lens"], used)], "<i4")
        files["kv_indptr"], files["kv_indices"], files["kv_last_page_len"] = indptr, indices, last
        ref["tables"], ref["lens"] = read_csr(indptr, indices, last, B)
    else:
        files["block_tables"] = tables.astype(c["index_dtype"])
        files["context_lens"] = np.array(c["lens"]).astype(c["index_dtype"])
        ref["tables"], ref["lens"] = tables, np.array(c["lens"])
    ref["alibi"] = ref["sinks"] = None
    if c["alibi"]:
        ref["alibi"] = 2.0 ** (-8.0 * np.arange(1, H + 1) / H)
        files["alibi_slopes"] = ref["alibi"].astype("<f4")
        ref["alibi"] = files["alibi_slopes"].astype(np.float64)
    if c["sinks"]:
        files["sinks"] = rng.uniform(-2, 2, H).astype("<f4")
        ref["sinks"] = files["sinks"].astype(np.float64)
    return files, ref




def command(cli, c, paths, out, flags):
    cmd = [cli, "attend", "--query", paths["query"], "--key-cache", paths["key_cache"], "--value-cache",
           paths["value_cache"], "--out", out]
    for name in ("block_tables", "context_lens", "kv_indptr", "kv_indices", "kv_last_page_len"):
        if name in paths:
            cmd += ["--" + name.replace("_", "-"), paths[name]]
    if c["scale"] is not None:
        cmd += ["--scale", repr(c["scale"])]
    if "alibi_slopes" in paths:
        cmd += ["--alibi-slopes", paths["alibi_slopes"]]
    if c["softcap"] > 0:
        cmd += ["--softcap", repr(c["softcap"])]
    if "sinks" in paths:
        cmd += ["--sinks", paths["sinks"]]
    if c["window"] > 0:
        cmd += ["--sliding-window", str(c["window"])]
    if c["kv_dtype"] != "auto":
        cmd += ["--kv-dtype", c["kv_dtype"], "--k-scale", repr(c["k_scale"]), "--v-scale", repr(c["v_scale"])]
    if c["dtype"] == "bf16":
        cmd += ["--dtype", "bf16"]
    return cmd + flags


def describe(c):
    extras = [k for k in ("alibi", "sinks") if c[k]]
    if c["softcap"]:
        extras.append(f"softcap {c['softcap']:.2f}")
    if c["window"]:
        extras.append(f"window {c['window']}")
    if c["scale"] is not None:
        extras.append(f"scale {c['scale']:.3f}")
    return (f"{c['dtype']} q, {c['kv_dtype']} kv, H {c['heads']}/Hkv {c['kv_heads']}, D {c['head_size']}, "
            f"B {c['block_size']}, lens {c['lens']}" + (", CSR page tables" if c["csr"] else "") +
            (", " + ", ".join(extras) if extras else ""))


def write_files(directory, files):
    paths = {}
    for name, array in files.items():
        paths[name] = os.path.join(directory, name + ".npy")
        np.save(paths[name], np.ascontiguousarray(array))
    return paths


def check_good_case(cli, rng, c, directory, flags):
    """None when the CLI's output matches the contract, else what went wrong."""
    files, ref = build_arrays(rng, c)
    paths = write_files(directory, files)
    out = os.path.join(directory, "out.npy")
    problem = attend_problem(command(cli, c, paths, out, flags), flags)
    if problem:
        return problem
    scale = c["scale"] if c["scale"] is not None else 1.0 / np.sqrt(c["head_size"])
    starts = np.arange(len(ref["lens"]) + 1)  # decode: one query token per request
    want, _ = attention(ref["q"], ref["k"], ref["v"], ref["tables"], ref["lens"], starts, None, scale, c["softcap"],
                        ref["alibi"], ref["sinks"], c["window"])
    return output_problems(np.load(out), want, c["dtype"])


# ---- bad inputs ----

BAD_KINDS = ["block_id", "context_len", "heads", "fp8_head_size", "value_shape", "missing_file", "csr_indptr",
             "csr_last_page_len", "csr_block_id", "csr_and_dense"]


def check_bad_case(cli, rng, kind, directory, flags):
    c = random_case(rng, 0)
    c.update(dtype="f32", kv_dtype="auto", heads=2, kv_heads=2, scale=None, softcap=0.0, alibi=False, sinks=False,
             window=0, head_size=64)
    c["lens"] = [int(rng.integers(1, 200)) for _ in range(3)]
    c["csr"] = kind.startswith("csr")
    files, _ = build_arrays(rng, c)
    if kind == "block_id":
        files["block_tables"] = files["block_tables"].copy()
        files["block_tables"][0, 0] = files["key_cache"].shape[0]
        must = "--block-tables"
    elif kind == "context_len":
        files["context_lens"] = files["context_lens"].copy()
        files["context_lens"][1] = files["block_tables"].shape[1] * c["block_size"] + 1
        must = "--context-lens"
    elif kind == "heads":
        S, H, D = files["query"].shape
        files["query"] = rng.uniform(-1, 1, (S, 3, D)).astype("<f4")  # 3 heads over 2 kv heads
        must = "num_heads"
    elif kind == "fp8_head_size":
        S, H, D = files["query"].shape
        files["query"] = files["query"][:, :, :40].astype("<f2").copy()  # D = 40: no fp8 layout (x = 16)
        c["kv_dtype"] = "fp8_e4m3"
        files["key_cache"] = np.zeros((files["key_cache"].shape[0], c["kv_heads"], 5, c["block_size"], 8), np.uint8)
        files["value_cache"] = np.zeros((files["key_cache"].shape[0], c["kv_heads"], 40, c["block_size"]), np.uint8)
        must = "40"
    elif kind == "csr_indptr":
        files["kv_indptr"] = files["kv_indptr"].copy()
        files["kv_indptr"][1] = files["kv_indptr"][2] + 1  # decreasing after it
        must = "--kv-indptr"
    elif kind == "csr_last_page_len":
        files["kv_last_page_len"] = files["kv_last_page_len"].copy()
        files["kv_last_page_len"][0] = 0  # a request with pages (every length is at least 1)
        must = "--kv-last-page-len"
    elif kind == "csr_block_id":
        files["kv_indices"] = files["kv_indices"].copy()
        files["kv_indices"][-1] = files["key_cache"].shape[0]
        must = "--kv-indices"
    elif kind == "csr_and_dense":
        files["block_tables"] = np.zeros((3, 1), "<i4")  # the dense form as well
        must = "--block-tables"
    elif kind == "value_shape":
        files["value_cache"] = files["value_cache"][..., :-1].copy()
        must = "--value-cache"
    paths = write_files(directory, files)
    if kind == "missing_file":
        os.remove(paths["key_cache"])
        must = "--key-cache"
    out = os.path.join(directory, "out.npy")
    run = subprocess.run(command(cli, c, paths, out, flags), capture_output=True, text=True, timeout=300)
    return refusal_problems(run, must, [out])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(parser, count=120, count_help="random valid cases", bad=len(BAD_KINDS))
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    flags = passed_flags(args)

    def good(i):
        c = random_case(rng, i)
        return describe(c), lambda directory: check_good_case(args.cli, rng, c, directory, flags)

    def bad(what):
        return f"bad input: {what}", lambda directory: check_bad_case(args.cli, rng, what, directory, flags)

    makers = [lambda i=i: good(i) for i in range(args.count)]
    makers += [lambda what=BAD_KINDS[i % len(BAD_KINDS)]: bad(what) for i in range(args.bad)]
    return run_cases("contract_check", makers, args, forced=args.count)

if __name__ == "__main__":
    sys.exit(main())
