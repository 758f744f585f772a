"""Small randomly initialised diffusers transformers (Flux, Wan) built from a config in code (no download), their
inputs, and the comparison used by the diffusers backend tests (one process, and under torchrun)."""
import copy

import torch


def flux_case(head_dim=128, heads=8, s_img=1000, s_txt=77, batch=1, layers=(2, 2), seed=0):
    """FluxTransformer2DModel (double- and single-stream blocks, joint text+image attention) and inputs.
    Image tokens on a 2-D grid of positions, text tokens at position 0 (as the Flux pipeline makes them)."""
    from diffusers import FluxTransformer2DModel
    torch.manual_seed(seed)
    axes = (16, 56, 56) if head_dim == 128 else (8, 28, 28)  # rope axes sum to head_dim
    model = FluxTransformer2DModel(patch_size=1, in_channels=64, num_layers=layers[0], num_single_layers=layers[1],
                                   attention_head_dim=head_dim, num_attention_heads=heads, joint_attention_dim=256,
                                   pooled_projection_dim=128, guidance_embeds=False, axes_dims_rope=axes)
    g = torch.Generator().manual_seed(seed + 1)
    w = 40
    ids = torch.arange(s_img)
    img_ids = torch.stack([torch.zeros(s_img), (ids // w).float(), (ids % w).float()], dim=1)
    inputs = dict(hidden_states=torch.randn(batch, s_img, 64, generator=g),
                  encoder_hidden_states=torch.randn(batch, s_txt, 256, generator=g),
                  pooled_projections=torch.randn(batch, 128, generator=g),
                  timestep=torch.full((batch,), 0.5), img_ids=img_ids, txt_ids=torch.zeros(s_txt, 3))
    calls = layers[0] + layers[1]  # attention calls per forward, all self (joint) attention
    return model, inputs, {"self": calls, "cross": 0}


def wan_case(head_dim=64, heads=8, frames=3, height=24, width=32, s_txt=77, batch=1, layers=2, seed=0):
    """WanTransformer3DModel (video: self-attention over frames*height/2*width/2 tokens, cross-attention to
    the text) and inputs."""
    from diffusers import WanTransformer3DModel
    torch.manual_seed(seed)
    model = WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=heads, attention_head_dim=head_dim,
                                  in_channels=16, out_channels=16, text_dim=128, freq_dim=64, ffn_dim=512,
                                  num_layers=layers, cross_attn_norm=True, qk_norm="rms_norm_across_heads",
                                  rope_max_seq_len=1024)
    g = torch.Generator().manual_seed(seed + 1)
    inputs = dict(hidden_states=torch.randn(batch, 16, frames, height, width, generator=g),
                  timestep=torch.full((batch,), 500.0),
                  encoder_hidden_states=torch.randn(batch, s_txt, 128, generator=g))
    return model, inputs, {"self": layers, "cross": layers}


def patch_logger_warning_once():
    """diffusers 0.42.1's context-parallel hook calls logger.warning_once (hooks/context_parallel.py, when an
    input such as Wan's 1-D timestep is not split), which only transformers' logging module defines on
    logging.Logger: without it Wan under context parallelism raises AttributeError, whatever the backend."""
    import functools
    import logging
    if not hasattr(logging.Logger, "warning_once"):
        logging.Logger.warning_once = functools.lru_cache(None)(logging.Logger.warning)


def to_device(inputs, device, dtype):
    return {k: (v.to(device, dtype) if v.is_floating_point() and k not in ("img_ids", "txt_ids", "timestep")
                else v.to(device)) for k, v in inputs.items()}


def prepared(model, inputs, device, dtype=torch.bfloat16):
    """(bf16 model, bf16 inputs, fp32 model, fp32 inputs): the fp32 pair holds the same (rounded) weights and
    inputs upcast, so that its output is the exact answer the low-precision runs approximate."""
    m16 = model.to(device, dtype).eval()
    keep = getattr(model, "_keep_in_fp32_modules", None) or []
    for name, mod in m16.named_modules():   # as from_pretrained(torch_dtype=...) keeps them (Wan: norms, rope)
        if name and any(k in name.split(".") for k in keep):
            mod.float()
    i16 = to_device(inputs, device, dtype)
    m32 = copy.deepcopy(m16).float()
    i32 = {k: (v.float() if v.is_floating_point() else v) for k, v in i16.items()}
    return m16, i16, m32, i32


@torch.no_grad()
def forward(model, inputs):
    out = model(**inputs, return_dict=False)[0]
    return out.float()


def compare(x, native, ref, what="", factor=2.0, max_factor=3.0):
    """x (xstage) against ref (fp32), with the native low-precision run's own error as the yardstick:
    norm-wise ||x - ref|| <= factor * ||native - ref|| + 1e-3 ||ref||, and elementwise
    max|x - ref| <= max_factor * max|native - ref| + 1e-3 max|ref|. Returns the numbers (printed)."""
    assert x.shape == ref.shape == native.shape, (x.shape, native.shape, ref.shape)
    assert torch.isfinite(x).all(), f"{what}: xstage output has non-finite values"
    rn = ref.norm().item()
    rmax = ref.abs().max().item()
    ex, en = (x - ref).norm().item() / rn, (native - ref).norm().item() / rn
    mx, mn = (x - ref).abs().max().item(), (native - ref).abs().max().item()
    line = (f"{what}: rel. L2 error xstage {ex:.3e} native {en:.3e} (ratio {ex / max(en, 1e-30):.2f}); "
            f"max abs error xstage {mx:.3e} native {mn:.3e}; |ref| max {rmax:.3e}")
    print(line)
    assert rn > 0 and en < 5e-2, f"{what}: the native low-precision run itself is off ({line})"
    assert ex <= factor * en + 1e-3, f"{what}: norm-wise error too large ({line})"
    assert mx <= max_factor * mn + 1e-3 * rmax, f"{what}: elementwise error too large ({line})"
    return line
