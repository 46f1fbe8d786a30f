#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""contract_check_multi_query: `vkpaged attend --query-starts` against an independent
implementation of docs/contract.md, "Multi-query attention".

Its reference is contract_math.py beside it (NumPy, float64, written from the contract alone; it
shares no code with vkpaged): it draws random engine steps (decode requests, prefill chunks after cached
prefixes, whole prompts, speculative requests with tree masks) over the three cache layouts,
writes them as .npy files, runs the CLI with --lse and compares output and log-sum-exp within
the contract's tolerances. A few single-token cases go without --query-starts on the nhd and
hnd layouts. About a third of the steps give their page tables in FlashInfer's CSR form
(--kv-indptr, --kv-indices, --kv-last-page-len), which the reference reads itself. Bad inputs must give a non-zero exit, one line on stderr naming the option, and no
output file.

Multi-head latent attention ("Multi-head latent attention", --mla N): contract_math's mla_attention is MLA
as the contract defines it, multi-query attention over one kv head whose key is a cache row of
Dk = Dv + R entries and whose value is the row's first Dv entries. Each MLA case runs
`vkpaged attend` on the MLA cache itself, half of them as one pool (--mla-cache with
--value-head-size), half as two (--ckv-cache and --kpe-cache), with one fp8 scale for both
parts; the output [T, H, Dv] must be mla_attention's.

    /usr/bin/python3 contract_check_multi_query.py path/to/vkpaged [--count N] [--seed S] [--device D] [--mla N]
"""
import argparse
import os
import subprocess
import sys

import numpy as np

from contract_math import ELEMENT_BYTES, as_nhbd, attention, cache_shapes, mla_attention, random_tree, read_csr, store
from contract_runner import (add_common_arguments, attend_problem, output_problems, passed_flags, refusal_problems,
                             run_cases)

# ---- random engine steps ----

def random_case(rng, index):
    c = {"dtype": str(rng.choice(["f32", "f16", "f16", "bf16"])),
         "kv_dtype": str(rng.choice(["auto", "auto", "fp8_e4m3", "fp8_e5m2"])),
         "layout": ["vllm", "nhd", "hnd"][index % 3],
         "head_size": int(rng.choice([32, 64, 80, 128])),
         "block_size": int(rng.choice([1, 8, 16, 32])),
         "kv_heads": int(rng.choice([1, 2]))}
    c["heads"] = c["kv_heads"] * int(rng.choice([1, 2, 3, 4]))
    if c["kv_dtype"] != "auto" and c["head_size"] % 16:
        c["head_size"] = 64
    B = c["block_size"]
    # The last few cases have one token per request and no --query-starts (nhd and hnd layouts).
    c["decode_only"] = index % 8 == 7 and c["layout"] != "vllm"
    c["tree"] = not c["decode_only"] and rng.random() < 0.35
    c["new"], c["lens"] = [], []
    for _ in range(int(rng.integers(1, 5))):
        kind = "decode" if c["decode_only"] else str(rng.choice(["decode", "spec", "chunk", "prompt"]))
        q = {"decode": 1, "spec": int(rng.integers(2, 9)), "chunk": int(rng.integers(2, 40)),
             "prompt": int(rng.integers(1, 60))}[kind]
        prefix = 0 if kind == "prompt" else int(rng.choice([0, 1, B - 1, B, B + 1, int(rng.integers(0, 300))]))
        c["new"].append(q)
        c["lens"].append(prefix + q)
    c["scale"] = float(rng.uniform(0.05, 0.3)) if rng.random() < 0.3 else None
    c["softcap"] = float(rng.uniform(0.5, 5.0)) if rng.random() < 0.3 else 0.0
    c["alibi"] = rng.random() < 0.3
    c["sinks"] = rng.random() < 0.3
    c["window"] = int(rng.integers(1, 60)) if rng.random() < 0.3 else 0
    c["k_scale"] = float(rng.choice([0.5, 0.125, 2.0])) if c["kv_dtype"] != "auto" else 1.0
    c["v_scale"] = float(rng.choice([0.25, 1.0, 4.0])) if c["kv_dtype"] != "auto" else 1.0
    c["csr"] = bool(rng.random() < 0.35)  # FlashInfer's page tables instead of the dense ones
    return c


def random_mla_case(rng, index):
    """An engine step of an MLA model: one kv head of Dk = Dv + R, any number of query heads, one
    fp8 scale, one pool or two."""
    c = random_case(rng, 1)  # layout nhd
    c["decode_only"] = index % 4 == 3
    if c["decode_only"]:  # one new token per request, no --query-starts
        c["tree"] = False
        c["lens"] = [L - n + 1 for L, n in zip(c["lens"], c["new"])]
        c["new"] = [1] * len(c["new"])
    c["latent"], c["rope"] = [(32, 16), (48, 16), (64, 32), (96, 32), (128, 64), (192, 64),
                                (512, 64)][index % 7]
    c["head_size"], c["kv_heads"] = c["latent"] + c["rope"], 1
    c["heads"] = int(rng.choice([1, 3, 8, 16]))
    c["v_scale"] = c["k_scale"]
    c["two_pools"] = index % 2 == 1
    return c


def random_mask(rng, q):
    """A draft tree (each token sees itself and its ancestors) or random 0/1 entries."""
    if rng.random() < 0.5:
        return (rng.random((q, q)) < 0.5).astype(np.uint8)
    return random_tree(rng, q)


def build(rng, c):
    S, H, Hkv, D, B = len(c["lens"]), c["heads"], c["kv_heads"], c["head_size"], c["block_size"]
    cache = c["dtype"] if c["kv_dtype"] == "auto" else c["kv_dtype"]
    x = 16 // ELEMENT_BYTES[cache]
    used = [(L + B - 1) // B for L in c["lens"]]
    M, N = max(used + [1]) + int(rng.integers(0, 3)), sum(used) + int(rng.integers(1, 5))
    T = sum(c["new"])
    files, ref = {}, {}
    files["query"], ref["q"] = store(rng, rng.uniform(-1, 1, (T, H, D)), c["dtype"])
    k_shape, v_shape = cache_shapes(c["layout"], N, Hkv, D, B, x)
    files["key_cache"], k = store(rng, rng.uniform(-1, 1, k_shape), cache, c["k_scale"])
    files["value_cache"], v = store(rng, rng.uniform(-1, 1, v_shape), cache, c["v_scale"])
    ref["k"], ref["v"] = as_nhbd(c["layout"], k, v)
    pool, tables, nxt = rng.permutation(N), rng.integers(0, N, (S, M)), 0
    for s in range(S):
        tables[s, : used[s]] = pool[nxt : nxt + used[s]]
        nxt += used[s]
    if c["csr"]:
        files["kv_indptr"] = np.concatenate([[0], np.cumsum(used)]).astype("<i4")
        files["kv_indices"] = np.concatenate([tables[s, : used[s]] for s in range(S)]).astype("<i4")
        files["kv_last_page_len"] = np.array([L - (u - 1) * B for L, u in zip(c["lens"], used)], "<i4")
        ref["tables"], ref["lens"] = read_csr(files["kv_indptr"], files["kv_indices"], files["kv_last_page_len"], B)
    else:
        files["block_tables"] = tables.astype("<i4")
        files["context_lens"] = np.array(c["lens"], "<i4")
        ref["tables"], ref["lens"] = files["block_tables"], c["lens"]
    ref["starts"] = np.concatenate([[0], np.cumsum(c["new"])]).astype("<i4")
    if not c["decode_only"]:
        files["query_starts"] = ref["starts"]
    ref["masks"] = None
    if c["tree"]:
        ref["masks"] = [random_mask(rng, q) for q in c["new"]]
        files["tree_mask"] = np.concatenate([m.reshape(-1) for m in ref["masks"]]).astype(np.uint8)
    ref["alibi"] = ref["sinks"] = None
    if c["alibi"]:
        files["alibi_slopes"] = (2.0 ** (-8.0 * np.arange(1, H + 1) / H)).astype("<f4")
        ref["alibi"] = files["alibi_slopes"].astype(np.float64)
    if c["sinks"]:
        files["sinks"] = rng.uniform(-2, 2, H).astype("<f4")
        ref["sinks"] = files["sinks"].astype(np.float64)
    return files, ref


OPTIONS = {"query": "--query", "key_cache": "--key-cache", "value_cache": "--value-cache",
           "block_tables": "--block-tables", "context_lens": "--context-lens", "query_starts": "--query-starts",
           "tree_mask": "--tree-mask", "alibi_slopes": "--alibi-slopes", "sinks": "--sinks",
           "kv_indptr": "--kv-indptr", "kv_indices": "--kv-indices", "kv_last_page_len": "--kv-last-page-len",
           "mla_cache": "--mla-cache", "ckv_cache": "--ckv-cache", "kpe_cache": "--kpe-cache"}




def command(cli, c, paths, out, lse, flags):
    cmd = [cli, "attend", "--out", out, "--lse", lse, "--kv-layout", c["layout"]]
    for name, path in paths.items():
        cmd += [OPTIONS[name], path]
    if c["scale"] is not None:
        cmd += ["--scale", repr(c["scale"])]
    if c["softcap"] > 0:
        cmd += ["--softcap", repr(c["softcap"])]
    if c["window"] > 0:
        cmd += ["--sliding-window", str(c["window"])]
    if c["kv_dtype"] != "auto":
        cmd += ["--kv-dtype", c["kv_dtype"], "--k-scale", repr(c["k_scale"]), "--v-scale", repr(c["v_scale"])]
    if c["dtype"] == "bf16":
        cmd += ["--dtype", "bf16"]
    return cmd + flags


def write(directory, files):
    paths = {}
    for name, array in files.items():
        paths[name] = os.path.join(directory, name + ".npy")
        np.save(paths[name], np.ascontiguousarray(array))
    return paths


def describe(c):
    extras = [k for k in ("alibi", "sinks", "tree") if c[k]]
    extras += [f"{k} {c[k]}" for k in ("softcap", "window", "scale") if c[k]]
    return (f"{c['dtype']} q, {c['kv_dtype']} kv, {c['layout']}, H {c['heads']}/{c['kv_heads']}, D {c['head_size']}, "
            f"B {c['block_size']}, new {c['new']}, lens {c['lens']}" + (", CSR page tables" if c["csr"] else "") +
            (", " + ", ".join(extras) if extras else ""))


def check_good(cli, rng, c, directory, flags):
    files, ref = build(rng, c)
    paths = write(directory, files)
    out, lse = os.path.join(directory, "out.npy"), os.path.join(directory, "lse.npy")
    problem = attend_problem(command(cli, c, paths, out, lse, flags), flags)
    if problem:
        return problem
    scale = c["scale"] if c["scale"] is not None else 1.0 / np.sqrt(c["head_size"])
    want, want_lse = attention(ref["q"], ref["k"], ref["v"], ref["tables"], ref["lens"], ref["starts"],
                               ref["masks"], scale, c["softcap"], ref["alibi"], ref["sinks"], c["window"])
    return output_problems(np.load(out), want, c["dtype"], np.load(lse), want_lse)


BAD = ["starts_not_zero", "starts_fall", "starts_past_t", "context_below_q", "mask_size", "mask_byte",
       "mask_without_starts", "layout_name", "csr_indptr_start", "csr_past_indices", "csr_last_page_len"]


def check_mla(cli, rng, c, directory, flags):
    """An MLA case on the CLI's MLA cache, one pool or two (the module docstring)."""
    files, ref = build(rng, c)
    Dv, N, B = c["latent"], ref["k"].shape[0], c["block_size"]
    rows = ref["k"][:, 0]  # [N, B, Dk]: the nhd key cache of one kv head, as float64
    pool = files.pop("key_cache").reshape(N, B, -1)  # [N, B, 1, Dk] -> [N, B, Dk], in the cache's codes
    del files["value_cache"]
    if c["two_pools"]:
        files["ckv_cache"], files["kpe_cache"] = pool[..., :Dv], pool[..., Dv:]
    else:
        files["mla_cache"] = pool
    paths = write(directory, files)
    out, lse = os.path.join(directory, "out.npy"), os.path.join(directory, "lse.npy")
    cmd = command(cli, c, paths, out, lse, flags)
    if not c["two_pools"]:
        cmd += ["--value-head-size", str(Dv)]
    problem = attend_problem(cmd, flags)
    if problem:
        return problem
    scale = c["scale"] if c["scale"] is not None else 1.0 / np.sqrt(c["head_size"])  # 1 / sqrt(Dk)
    want, want_lse = mla_attention(ref["q"], rows, Dv, ref["tables"], ref["lens"], ref["starts"], ref["masks"],
                                   scale=scale, softcap=c["softcap"], alibi=ref["alibi"], sinks=ref["sinks"],
                                   window=c["window"])
    return output_problems(np.load(out), want, c["dtype"], np.load(lse), want_lse)


def describe_mla(c):
    form = "two pools" if c["two_pools"] else "one pool"
    return f"MLA Dv {c['latent']} R {c['rope']} {form}, " + describe(c)


def check_bad(cli, rng, kind, directory, flags):
    c = random_case(rng, 0)
    c.update(dtype="f32", kv_dtype="auto", layout="nchw" if kind == "layout_name" else "vllm", decode_only=False,
             tree=kind.startswith("mask"), scale=None, softcap=0.0, alibi=False, sinks=False, window=0, head_size=32,
             new=[3, 2], lens=[10, 40], csr=kind.startswith("csr"))
    files, _ = build(rng, c)  # (an unknown layout's caches are built as vllm's)
    must = "--query-starts"
    if kind == "starts_not_zero":
        files["query_starts"] = np.array([1, 3, 5], "<i4")
    elif kind == "starts_fall":
        files["query_starts"] = np.array([0, 4, 3], "<i4")
    elif kind == "starts_past_t":
        files["query_starts"] = np.array([0, 3, 6], "<i4")
    elif kind == "context_below_q":
        files["context_lens"] = np.array([2, 40], "<i4")
        must = "--context-lens"
    elif kind == "mask_size":
        files["tree_mask"] = files["tree_mask"][:-1]
        must = "--tree-mask"
    elif kind == "mask_byte":
        files["tree_mask"] = files["tree_mask"].copy()
        files["tree_mask"][2] = 2
        must = "--tree-mask"
    elif kind == "mask_without_starts":
        del files["query_starts"]
        must = "--tree-mask"
    elif kind == "layout_name":
        must = "--kv-layout"
    elif kind == "csr_indptr_start":
        files["kv_indptr"] = files["kv_indptr"] + 1  # not 0 first
        must = "--kv-indptr"
    elif kind == "csr_past_indices":
        files["kv_indptr"] = files["kv_indptr"].copy()
        files["kv_indptr"][-1] += 1  # one past kv_indices' end
        must = "--kv-indptr"
    elif kind == "csr_last_page_len":
        files["kv_last_page_len"] = files["kv_last_page_len"].copy()
        files["kv_last_page_len"][1] = c["block_size"] + 1
        must = "--kv-last-page-len"
    paths = write(directory, files)
    out, lse = os.path.join(directory, "out.npy"), os.path.join(directory, "lse.npy")
    run = subprocess.run(command(cli, c, paths, out, lse, flags), capture_output=True, text=True, timeout=300)
    return refusal_problems(run, must, [out, lse])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(parser, count=60, count_help="random engine steps", bad=len(BAD))
    parser.add_argument("--mla", type=int, default=0, help="MLA engine steps after the others (default 0)")
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    flags = passed_flags(args)

    def good(i):
        c = random_case(rng, i)
        return describe(c), lambda directory: check_good(args.cli, rng, c, directory, flags)

    def mla(i):
        c = random_mla_case(rng, i)
        return describe_mla(c), lambda directory: check_mla(args.cli, rng, c, directory, flags)

    def bad(what):
        return f"bad input: {what}", lambda directory: check_bad(args.cli, rng, what, directory, flags)

    makers = [lambda i=i: good(i) for i in range(args.count)]
    makers += [lambda what=BAD[i % len(BAD)]: bad(what) for i in range(args.bad)]
    makers += [lambda i=i: mla(i) for i in range(args.mla)]
    return run_cases("contract_check_multi_query", makers, args, forced=args.count + args.mla)

if __name__ == "__main__":
    sys.exit(main())
