"""Inputs shared by the Python MoE layer's GPU tests (test_python_moe.py) and its two-rank worker (moe_two_ranks.py)."""
import torch


def make_inputs(tokens, hidden, inter, experts, topk, seed, skewed=False):
    """Random activations and weights (scaled so outputs are O(1)), a routing with k distinct experts per token
    (uniform, or Zipf-like: expert e drawn with weight 1/(e+1)) and softmax-like combine weights."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(tokens, hidden, generator=gen, device="cuda")
    w1 = torch.randn(experts, 2 * inter, hidden, generator=gen, device="cuda") / hidden ** 0.5
    w2 = torch.randn(experts, hidden, inter, generator=gen, device="cuda") / inter ** 0.5
    p = (1.0 / torch.arange(1, experts + 1, device="cuda", dtype=torch.float32)) if skewed else \
        torch.ones(experts, device="cuda")
    idx = torch.multinomial(p.expand(tokens, experts).contiguous(), topk, replacement=False, generator=gen).to(torch.int32)
    wt = torch.rand(tokens, topk, generator=gen, device="cuda") + 0.1
    return x, w1, w2, idx, wt / wt.sum(-1, keepdim=True)
