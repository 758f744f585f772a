#!/usr/bin/env python3
"""Correctness tools for the attention kernel on the device (no timing: timed comparisons go through
bench_attention.py and the benchmark protocol, docs/BENCHMARKING.md). Calls the kernel's host entry
run_fwd_sm90 of each library directly (through ctypes, no validation layer) and compares with an fp32
reference computed by torch, per head.

    python3 bench/attention/attention_check.py check OUTDIR LIB.so       # bf16/fp16, D 64/128, odd shapes, causal, packed
    python3 bench/attention/attention_check.py sanitize OUTDIR LIB.so    # small shapes, for compute-sanitizer
"""
import ctypes, json, math, os, sys

if __name__ == "__main__":  # the usage before torch is imported: --help and a wrong call need no torch
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__.strip())
        sys.exit(0)
    if len(sys.argv) < 4 or sys.argv[1] not in ("check", "sanitize"):
        sys.exit(f"attention_check.py: want check|sanitize OUTDIR LIB.so..., got {sys.argv[1:]}\n{__doc__.strip()}")
import torch

SYM = "_ZN6xstage9attention12run_fwd_sm90ERK22xstage_attn_fwd_paramsP11CUstream_st"

class Params(ctypes.Structure):
    _fields_ = [("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p), ("o", ctypes.c_void_p),
                ("lse", ctypes.c_void_p), ("batch", ctypes.c_int), ("seqlen_q", ctypes.c_int),
                ("seqlen_kv", ctypes.c_int), ("heads", ctypes.c_int), ("head_dim", ctypes.c_int),
                ("q_stride", ctypes.c_int64 * 3), ("k_stride", ctypes.c_int64 * 3),
                ("v_stride", ctypes.c_int64 * 3), ("o_stride", ctypes.c_int64 * 3),
                ("softmax_scale", ctypes.c_float), ("causal", ctypes.c_int), ("dtype", ctypes.c_int)]

def load(path):
    f = getattr(ctypes.CDLL(path), SYM)
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.POINTER(Params), ctypes.c_void_p]
    return f

def attn(fn, q, k, v, o, lse=None, causal=False, scale=0.0):
    """q,k,v,o: [B, S, H, D] views (dim stride 1)."""
    p = Params()
    p.q, p.k, p.v, p.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr()
    p.lse = lse.data_ptr() if lse is not None else None
    p.batch, p.seqlen_q, p.heads, p.head_dim = q.shape[0], q.shape[1], q.shape[2], q.shape[3]
    p.seqlen_kv = k.shape[1]
    for name, t in (("q_stride", q), ("k_stride", k), ("v_stride", v), ("o_stride", o)):
        getattr(p, name)[:] = t.stride()[:3]
    p.softmax_scale, p.causal = scale, int(causal)
    p.dtype = 0 if q.dtype == torch.bfloat16 else 1
    rc = fn(ctypes.byref(p), torch.cuda.current_stream().cuda_stream)
    if rc != 0:
        raise RuntimeError(f"run_fwd_sm90 returned cudaError {rc}")

def reference(q, k, v, causal, dtype_math):
    """Per head; returns out [B,S,H,D] and lse [B,H,S] in fp32 (math in dtype_math)."""
    B, Sq, H, D = q.shape
    Skv = k.shape[1]
    scale = 1.0 / math.sqrt(D)
    out = torch.empty(B, Sq, H, D, device=q.device, dtype=torch.float32)
    lse = torch.empty(B, H, Sq, device=q.device, dtype=torch.float32)
    for b in range(B):
        for h in range(H):
            qq, kk, vv = (t[b, :, h].to(dtype_math) for t in (q, k, v))
            s = (qq @ kk.T).float() * scale
            if causal:
                i = torch.arange(Sq, device=q.device)[:, None]
                j = torch.arange(Skv, device=q.device)[None, :]
                s = s.masked_fill(j > i + Skv - Sq, float("-inf"))
            lse[b, h] = torch.logsumexp(s, -1)
            pr = torch.softmax(s, -1).nan_to_num(0.0)
            out[b, :, h] = (pr.to(dtype_math) @ vv).float()
    return out, lse

def check(fn, B, Sq, Skv, H, D, dtype, causal=False, packed=False, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    if packed:  # q, k, v as strided views of one [B, S, 3, H, D] tensor
        qkv = torch.randn(B, Sq, 3, H, D, device="cuda", dtype=dtype, generator=g)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    else:
        q = torch.randn(B, Sq, H, D, device="cuda", dtype=dtype, generator=g)
        k = torch.randn(B, Skv, H, D, device="cuda", dtype=dtype, generator=g)
        v = torch.randn(B, Skv, H, D, device="cuda", dtype=dtype, generator=g)
    o = torch.full((B, Sq, H, D), float("nan"), device="cuda", dtype=dtype)
    lse = torch.full((B, H, Sq), float("nan"), device="cuda", dtype=torch.float32)
    attn(fn, q, k, v, o, lse, causal)
    torch.cuda.synchronize()
    ref, ref_lse = reference(q, k, v, causal, torch.float32)
    low, _ = reference(q, k, v, causal, dtype)
    err = (o.float() - ref).abs().max().item()
    base = (low - ref).abs().max().item()
    lse_ok = torch.allclose(lse, ref_lse, atol=2e-3, rtol=1e-4, equal_nan=False) or (
        causal and bool(((lse == ref_lse) | (lse - ref_lse).abs().lt(2e-3)).all()))
    nan = bool(torch.isnan(o).any())
    ok = (not nan) and err <= 2 * base + 2e-3 and lse_ok
    return dict(B=B, Sq=Sq, Skv=Skv, H=H, D=D, dtype=str(dtype).split(".")[-1], causal=causal, packed=packed,
                err=err, base=base, lse_ok=lse_ok, nan=nan, ok=ok)

def main():
    mode, out_dir, libs = sys.argv[1], sys.argv[2], sys.argv[3:]
    fns = [load(l) for l in libs]
    fn = fns[0]
    if mode == "sanitize":
        for D in (64, 128):
            for dt in (torch.bfloat16, torch.float16):
                r = check(fn, 1, 200, 333, 2, D, dt, causal=False)
                print("sanitize-shape", r)
        r = check(fn, 1, 300, 130, 2, 128, torch.bfloat16, causal=True)
        print("sanitize-shape", r)
        return
    if mode == "check":
        cases = []
        for dt in (torch.bfloat16, torch.float16):
            for D in (64, 128):
                cases += [(1, 1, 1, 1, D, dt, False, False), (1, 127, 127, 3, D, dt, False, False),
                          (2, 8191, 8191, 2, D, dt, False, False), (1, 1000, 3000, 5, D, dt, False, False),
                          (3, 257, 129, 40, D, dt, False, True), (1, 384, 384, 4, D, dt, True, False),
                          (1, 500, 200, 3, D, dt, True, False), (1, 200, 700, 3, D, dt, True, True)]
        cases += [(1, 4096, 4096, 12, 128, torch.bfloat16, False, False), (1, 16384, 16384, 1, 128, torch.bfloat16, False, False)]
        rows, bad = [], 0
        for c in cases:
            r = check(fn, *c)
            rows.append(r)
            bad += not r["ok"]
            print(("OK  " if r["ok"] else "BAD ") + json.dumps(r))
        json.dump(rows, open(os.path.join(out_dir, "check-" + os.path.basename(libs[0]) + ".json"), "w"), indent=1)
        print(f"check: {len(rows) - bad}/{len(rows)} passed")
        return
    raise SystemExit(f"unknown mode {mode!r} (check, sanitize)")


if __name__ == "__main__":
    main()
