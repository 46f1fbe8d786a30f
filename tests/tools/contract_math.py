# SPDX-License-Identifier: Apache-2.0
"""docs/contract.md in float64 NumPy, written from the document alone (it shares no code with
vkpaged): element formats, the cache layouts, FlashInfer's page tables, multi-query attention
(decode is its case of one token per request), multi-head latent attention, draft-tree masks and
rotary embedding (include/vkpaged/rotary.hpp's definition). The one reference of the contract
checks beside it (contract_check.py, contract_check_multi_query.py: the CLI) and of the Python
package's tests (python/tests, through its conftest.py)."""
import numpy as np

FP8 = {"fp8_e4m3": (4, 3, 7), "fp8_e5m2": (5, 2, 15)}  # exponent bits, mantissa bits, bias
ELEMENT_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1}
# "Tolerances used by the tests": by the query's dtype; fp8 caches with an f16 query as f16.
TOLERANCE = {"f32": 1e-4, "f16": 3e-3, "bf16": 2e-2}


def fp8_table(name):
    """The value of each of the 256 codes (E4M3FN: no infinities, 0x7f/0xff NaN)."""
    e_bits, m_bits, bias = FP8[name]
    values = np.zeros(256)
    for code in range(256):
        e, m = (code >> m_bits) & ((1 << e_bits) - 1), code & ((1 << m_bits) - 1)
        if name == "fp8_e4m3" and e == 15 and m == 7:
            v = np.nan
        elif name == "fp8_e5m2" and e == 31:
            v = np.nan if m else np.inf
        elif e == 0:
            v = m * 2.0 ** (1 - bias - m_bits)
        else:
            v = (1 + m / 2.0 ** m_bits) * 2.0 ** (e - bias)
        values[code] = -v if code & 0x80 else v
    return values


def bf16_bits(values):
    """float32 -> bf16 bits, round to nearest even."""
    u = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits):
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def store(rng, values, dtype, scale=1.0):
    """What an array of `dtype` holds for `values`, and the float64 values it stands for. fp8:
    random finite codes whose value times `scale` stays within [-1, 1]."""
    if dtype == "bf16":
        bits = bf16_bits(values)
        return bits, bf16_values(bits)
    if dtype in FP8:
        table = fp8_table(dtype)
        finite = np.array([c for c in range(256) if np.isfinite(table[c]) and abs(table[c]) * scale <= 1.0], np.uint8)
        codes = rng.choice(finite, size=np.shape(values))
        return codes, table[codes] * scale
    a = np.asarray(values).astype({"f32": np.float32, "f16": np.float16}[dtype])
    return a, a.astype(np.float64)


def stored_values(array, dtype, scale=1.0):
    """The float64 values an array of `dtype` stands for (fp8 times its scale)."""
    if dtype == "bf16":
        return bf16_values(array)
    if dtype in FP8:
        return fp8_table(dtype)[np.asarray(array)] * scale
    return np.asarray(array).astype(np.float64)


def check_attention(out, lse, want_out, want_lse, query_dtype):
    """An attention call's output (of query_dtype; bf16 as uint16 bits) and LSE against the float64
    ones, within the contract's tolerance for that dtype."""
    tol = TOLERANCE[query_dtype]
    got = stored_values(out, query_dtype)
    assert got.shape == want_out.shape
    np.testing.assert_allclose(got, want_out, atol=tol, rtol=0)
    np.testing.assert_allclose(lse, want_lse, atol=tol, rtol=0)


def cache_shapes(layout, N, Hkv, D, B, x):
    """Key and value cache shapes of a layout (x = 16 / element bytes)."""
    if layout == "nhd":
        return (N, B, Hkv, D), (N, B, Hkv, D)
    if layout == "hnd":
        return (N, Hkv, B, D), (N, Hkv, B, D)
    return (N, Hkv, D // x, B, x), (N, Hkv, D, B)


def as_nhbd(layout, k, v):
    """Both caches as [N, Hkv, B, D]: key element (block b, head g, dim d, offset o) is
    K[b][g][d / x][o][d % x] in vllm, K[b][o][g][d] in nhd, K[b][g][o][d] in hnd; value element
    V[b][g][d][o] in vllm, as the key in the others."""
    if layout == "nhd":
        return k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
    if layout == "hnd":
        return k, v
    N, Hkv, Dx, B, x = k.shape
    return k.transpose(0, 1, 3, 2, 4).reshape(N, Hkv, B, Dx * x), v.transpose(0, 1, 3, 2)


def from_nhbd(layout, k, v, x):
    """The inverse of as_nhbd: [N, Hkv, B, D] arrays in a layout's shapes."""
    if layout == "nhd":
        return k.transpose(0, 2, 1, 3).copy(), v.transpose(0, 2, 1, 3).copy()
    if layout == "hnd":
        return k.copy(), v.copy()
    N, Hkv, B, D = k.shape
    return k.reshape(N, Hkv, B, D // x, x).transpose(0, 1, 3, 2, 4).copy(), v.transpose(0, 1, 3, 2).copy()


def read_csr(indptr, indices, last, B):
    """FlashInfer's page tables: request s's blocks indices[indptr[s]:indptr[s + 1]], its length
    (pages - 1) * B + last[s] (0 without pages). Returns block tables [S, max pages] and lengths [S]."""
    S = len(indptr) - 1
    pages = [int(indptr[s + 1] - indptr[s]) for s in range(S)]
    tables = np.zeros((S, max(pages + [1])), np.int64)
    for s in range(S):
        tables[s, : pages[s]] = indices[indptr[s] : indptr[s + 1]]
    lens = np.array([0 if p == 0 else (p - 1) * B + int(last[s]) for s, p in enumerate(pages)], np.int64)
    return tables, lens


def random_tree(rng, q):
    """A draft tree of q tokens: each token sees itself and its ancestors."""
    parent = [-1] + [int(rng.integers(0, j)) for j in range(1, q)]
    mask = np.zeros((q, q), np.uint8)
    for j in range(q):
        a = j
        while a >= 0:
            mask[j, a] = 1
            a = parent[a]
    return mask


def attention(q, k, v, tables, lens, starts, masks=None, scale=None, softcap=0.0, alibi=None, sinks=None, window=0):
    """Multi-query attention ("Multi-query attention"; decode when every q_s is 1).
    q [T, H, D]; k, v [N, Hkv, B, D]; masks: per request a q_s x q_s 0/1 array (or None for
    causal). Returns output [T, H, D] and log-sum-exp [T, H]."""
    T, H, D = q.shape
    Hkv, B = k.shape[1], k.shape[2]
    scale = 1.0 / np.sqrt(D) if scale is None else scale
    out, lse = np.zeros((T, H, v.shape[3])), np.full((T, H), -np.inf)  # v may be narrower than k (MLA)
    for s in range(len(lens)):
        L, q0, q1 = int(lens[s]), int(starts[s]), int(starts[s + 1])
        first_new = L - (q1 - q0)
        for j in range(q1 - q0):
            p = first_new + j  # the query's position: aligned bottom-right
            t = np.arange(L)
            t0 = max(0, p - window + 1) if window > 0 else 0
            if masks is None or masks[s] is None:
                seen = (t >= t0) & (t <= p)
            else:  # the mask replaces causality among the new tokens; the window holds for every key
                seen = t >= t0
                seen[first_new:] &= masks[s][j] != 0
            t = t[seen]
            blocks = np.asarray(tables)[s, t // B].astype(np.int64)
            for h in range(H):
                g = h // (H // Hkv)
                logits = scale * (k[blocks, g, t % B, :] @ q[q0 + j, h])
                if softcap > 0:
                    logits = softcap * np.tanh(logits / softcap)
                if alibi is not None:
                    logits = logits + alibi[h] * (t - p)
                every = np.concatenate([logits, [sinks[h]]]) if sinks is not None else logits
                if every.size == 0:
                    continue  # an empty range gives 0
                m = every.max()
                den = np.exp(every - m).sum()
                out[q0 + j, h] = np.exp(logits - m) @ v[blocks, g, t % B, :] / den
                lse[q0 + j, h] = m + np.log(den)
    return out, lse


def mla_attention(q, rows, value_head_size, tables, lens, starts, masks=None, **features):
    """Multi-head latent attention ("Multi-head latent attention"): multi-query attention over one
    shared kv head whose key is a cache row [Dk] (the latent, then the rotary part) and whose value
    is the row's first Dv entries. q [T, H, Dk]; rows [N, B, Dk] (two pools: ckv and kpe joined
    along the last axis). Returns output [T, H, Dv] and log-sum-exp [T, H]; the scale defaults to
    1/sqrt(Dk)."""
    k = np.asarray(rows)[:, None]  # [N, Hkv = 1, B, Dk]
    return attention(q, k, k[..., :value_head_size], tables, lens, starts, masks, **features)


def rotate(x, positions, cos_sin, style):
    """Rotary embedding of x [T, heads, D] (float64): pairs (i, i + r/2) for neox, (2i, 2i + 1) for
    gptj, with c = cos_sin[p][i], s = cos_sin[p][r/2 + i]; x' = x c - y s, y' = y c + x s."""
    out = np.array(x, dtype=np.float64)
    r = cos_sin.shape[1]
    for i in range(r // 2):
        a, b = (i, i + r // 2) if style == "neox" else (2 * i, 2 * i + 1)
        c = cos_sin[positions, i][:, None]
        s = cos_sin[positions, r // 2 + i][:, None]
        xa, xb = out[:, :, a].copy(), out[:, :, b].copy()
        out[:, :, a] = xa * c - xb * s
        out[:, :, b] = xb * c + xa * s
    return out
