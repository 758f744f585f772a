#!/usr/bin/env bash
# One device call of the attn-kernel engineer: quick correctness sweep of the sm_90a attention kernel
# against an fp32 reference (through ctypes on the kernel's host entry), a benchmark against torch SDPA
# (cuDNN and flash backends) in the same process (interleaved rounds: median of 5 means of 5 back-to-back calls, after warm-up), optional variant libraries, compute-sanitizer on a
# small shape. Writes CSV/JSON under $OUT (default results/attention/dev). Run from the repo root.
#   scripts/attention-device.sh [lib.so ...]    first lib is the main one; others are timed as variants
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
OUT=${OUT:-results/attention/dev}
mkdir -p "$OUT"
LIBS=("$@")
[ ${#LIBS[@]} -eq 0 ] && LIBS=(build-attn/src/kernels/attention/libxstage_attention.so)
PY=$(mktemp /tmp/attn_dev_XXXX.py)
cat > "$PY" <<'PYEOF'
import ctypes, json, math, os, statistics, sys, time
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend

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

def bench_interleaved(fs, rounds=5, reps=5):
    """Median over `rounds` samples of the mean time of `reps` back-to-back calls (launch overhead
    hidden behind the previous kernel); the callables alternate by round so clock drift hits them alike."""
    for f in fs:
        for _ in range(3):
            f()
    torch.cuda.synchronize()
    samples = [[] for _ in fs]
    for _ in range(rounds):
        for i, f in enumerate(fs):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(reps):
                f()
            b.record(); b.synchronize()
            samples[i].append(a.elapsed_time(b) / reps)
    return [statistics.median(t) for t in samples]

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
    # bench
    grid = [(H, S, 128) for H in (3, 6, 12, 24, 40) for S in (4096, 8192, 16384, 32768, 65536)]
    grid += [(H, S, 64) for H in (12, 24) for S in (4096, 8192, 16384, 32768)]
    if mode == "bench-quick":
        grid = [(24, 8192, 128), (24, 16384, 128), (12, 32768, 128), (24, 8192, 64)]
    if mode == "bench-d64":
        grid = [(H, S, 64) for H in (3, 12, 24, 40) for S in (4096, 8192, 16384, 32768)] + [(24, 8192, 128), (12, 32768, 128)]
    rows = []
    lines = ["H,S,D,ours," + ",".join(f"var{i}" for i in range(1, len(fns))) + ",cudnn,flash,ratio_cudnn,ratio_flash"]
    for H, S, D in grid:
        dt = torch.bfloat16
        q, k, v = (torch.randn(1, S, H, D, device="cuda", dtype=dt) for _ in range(3))
        o = torch.empty_like(q)
        flop = 4.0 * H * S * S * D
        tf = lambda ms: flop / ms / 1e9
        qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
        names, fs = [], []
        for i, f in enumerate(fns):
            names.append("ours" if i == 0 else f"var{i}")
            fs.append(lambda f=f: attn(f, q, k, v, o))
        for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
            def sdpa(be=be):
                with sdpa_kernel([be]):
                    return F.scaled_dot_product_attention(qt, kt, vt)
            names.append(name)
            fs.append(sdpa)
        res = {n: tf(ms) for n, ms in zip(names, bench_interleaved(fs))}
        row = dict(H=H, S=S, D=D, **res, ratio_cudnn=res["ours"] / res["cudnn"], ratio_flash=res["ours"] / res["flash"])
        rows.append(row)
        line = f"{H},{S},{D}," + ",".join(f"{res[k]:.1f}" for k in res) + f",{row['ratio_cudnn']:.3f},{row['ratio_flash']:.3f}"
        lines.append(line)
        print(line)
        del q, k, v, o
    open(os.path.join(out_dir, f"{mode}.csv"), "w").write("\n".join(lines) + "\n")
    summary = dict(machine=f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, cuDNN "
                   f"{torch.backends.cudnn.version()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
                   command=os.environ.get("ATTN_COMMAND", "scripts/attention-device.sh " + " ".join(libs)), csv=f"{mode}.csv")
    for key in [n for n in rows[0] if n == "ours" or n.startswith("var")]:
        r_all = [r[key] / r["cudnn"] for r in rows]
        r_large = [r[key] / r["cudnn"] for r in rows if r["D"] == 128 and r["S"] >= 8192 and r["H"] >= 12]
        pre = "" if key == "ours" else key + "_"
        summary[pre + "min_ratio_vs_cudnn_large"] = min(r_large) if r_large else None
        summary[pre + "min_ratio_vs_cudnn_all"] = min(r_all)
        summary[pre + "median_ratio_vs_cudnn"] = statistics.median(r_all)
    json.dump(summary, open(os.path.join(out_dir, f"summary-{mode}.json"), "w"), indent=1)
    print(json.dumps(summary))

main()
PYEOF
STEPS=${STEPS:-"ctest check bench sanitize"}
echo "== device: $(nvidia-smi --query-gpu=name,clocks.sm,driver_version --format=csv,noheader | head -1)  $(date -u)"
for step in $STEPS; do
  case $step in
    ctest) echo "== ctest (attention, gpu)"
           timeout ${CTEST_TIMEOUT:-60} ctest --test-dir build-attn -L gpu -R attention --output-on-failure 2>&1 | tail -25 ;;
    gtest) echo "== harness GPU tests (gtest + python module) on build-attn"
           timeout ${GTEST_TIMEOUT:-60} build-attn/tests/attention/test_attention_gpu 2>&1 | grep -E "^\[  (PASSED|FAILED|  OK|SKIPPED) |FAILED|Failure|error" | tail -30
           echo "gtest rc=${PIPESTATUS[0]}"
           XSTAGE_ATTENTION_LIB=build-attn/src/kernels/attention/libxstage_attention.so PYTHONPATH=python \
             timeout 60 python3 tests/attention/run_pytest.py tests/attention/test_python_module.py 2>&1 | tail -4
           echo "pytest rc=${PIPESTATUS[0]}" ;;
    hbench*) echo "== harness benchmark ($step) on ${LIBS[0]}"
           timeout ${HBENCH_TIMEOUT:-120} python3 bench/attention/bench_attention.py --lib "${LIBS[0]}" --out "$OUT" \
             $([ "$step" = hbench-quick ] && echo --quick) 2>&1 | grep -v "^[0-9a-z]*,\|^#" | tail -45 ;;
    check) for lib in ${CHECK_LIBS:-${LIBS[0]}}; do echo "== check $lib"
           timeout ${CHECK_TIMEOUT:-70} python3 "$PY" check "$OUT" "$lib" 2>&1 | grep -v "^OK " | tail -40; done ;;
    bench*) echo "== $step"
           timeout ${BENCH_TIMEOUT:-90} python3 "$PY" "$step" "$OUT" "${LIBS[@]}" 2>&1 | tail -45 ;;
    sanitize) for lib in ${SAN_LIBS:-${LIBS[0]}}; do echo "== sanitizer $lib"
           timeout ${SAN_TIMEOUT:-60} compute-sanitizer --tool memcheck --error-exitcode 9 python3 "$PY" sanitize "$OUT" "$lib" 2>&1 | grep -v "^$" | grep -v "^sanitize-shape.*'ok': True" | tail -12
           echo "sanitizer rc=${PIPESTATUS[0]}"; done ;;
  esac
done
