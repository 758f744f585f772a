"""s50: where a Python call of the MoE layer spends its host time (Qwen3-30B and V4-Flash, 8192 tokens, W8A8, P = 1).
Per call, with the GPU idle before it (synchronised): the routing's copy to the host, the C ABI's forward (validation,
host plan, tables, descriptors, launches; returns when enqueued), then the GPU's remaining time until the stream is
done; and the whole Python call the same way. Medians of 30 calls after 5 warm-ups."""
import ctypes
import statistics
import sys
import time

import torch

sys.path.insert(0, "python")
from xstage import moe as M  # noqa: E402
from xstage.team import Team  # noqa: E402

team = Team.emulated(1)
for name, (H, I, E, k) in {"qwen3-30b-a3b": (2048, 768, 128, 8), "deepseek-v4-flash": (4096, 2048, 256, 6)}.items():
    T = 8192
    gen = torch.Generator(device="cuda").manual_seed(1)
    w = M.quantize_weights(torch.randn(E, 2 * I, H, generator=gen, device="cuda") / H ** 0.5,
                           torch.randn(E, H, I, generator=gen, device="cuda") / I ** 0.5, "w8a8")
    x = torch.randn(T, H, generator=gen, device="cuda")
    codes, scales = M.quantize_act(x)
    idx = torch.multinomial(torch.ones(T, E, device="cuda"), k, generator=gen).to(torch.int32)
    wt = torch.full((T, k), 1.0 / k, device="cuda")
    out = torch.empty(T, H, device="cuda")
    layer = M.MoeLayer(team, H, I, E, k, T)
    arr = ctypes.c_void_p * 1
    stream = torch.cuda.current_stream().cuda_stream
    rows = {"routing_to_host": [], "c_forward": [], "gpu_after_enqueue": [], "python_call": [], "python_call_gpu_after": []}
    for it in range(35):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        routing = layer._routing_on_host([idx])
        t1 = time.perf_counter()
        rc = M._lib().xstage_moe_forward(layer._h, routing.numpy().ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                                         arr(codes.data_ptr()), arr(scales.data_ptr()), arr(wt.data_ptr()),
                                         arr(out.data_ptr()), w.w1.data_ptr(), w.w1_scale.data_ptr(), w.w2.data_ptr(),
                                         w.w2_scale.data_ptr(), 1, ctypes.c_void_p(stream))
        assert rc == 0
        t2 = time.perf_counter()
        torch.cuda.synchronize()
        t3 = time.perf_counter()
        layer(codes, idx, wt, w, x_scale=scales, out=out)
        t4 = time.perf_counter()
        torch.cuda.synchronize()
        t5 = time.perf_counter()
        if it >= 5:
            for key, v in zip(rows, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
                rows[key].append(v * 1e3)
    layer.check()
    print(name, "  ".join(f"{k} {statistics.median(v):.3f} ms" for k, v in rows.items()), flush=True)
