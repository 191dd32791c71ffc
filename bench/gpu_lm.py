"""The plain-PyTorch side of bench/gpu_lm.cpp: the same GPT-2-small-size model (pre-norm blocks, causal
scaled_dot_product_attention, tanh GELU, the output layer tied to the token embedding, N(0, 0.02) weights), the
same random tokens, bf16 autocast and AdamW (fused=True on CUDA), timed the same way: the steps after the warm-up
ones, the device synchronised at both ends, the best of --rounds. No torch.compile: the loop users write first.

    python3 bench/gpu_lm.py [--steps 30] [--warmup 5] [--rounds 2] [--batch-size 16] [--seq 1024] [--layers 12]
                            [--width 768] [--heads 12] [--vocab 50304] [--peak-tflops 989] [--device cuda|cpu]
                            [--tiny]

Prints "RESULT gpu_lm.py tokens_per_s=..." (scripts/gpu-check.sh reads it).
"""
import argparse
import math
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # the Debian 13 chroot may lack python3-torch
    print("gpu_lm.py: skipped: %s" % e)
    sys.exit(0)


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            y = att.masked_fill(mask, float("-inf")).softmax(-1) @ v
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.wte = nn.Embedding(a.vocab, a.width)
        self.wpe = nn.Embedding(a.seq, a.width)
        self.h = nn.ModuleList(Block(a.width, a.heads) for _ in range(a.layers))
        self.lnf = nn.LayerNorm(a.width)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if "ln" in name:
                    continue
                if p.dim() >= 2:
                    p.normal_(0.0, 0.02)
                else:
                    p.zero_()

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.size(1), device=tokens.device))
        for block in self.h:
            x = block(x)
        return F.linear(self.lnf(x), self.wte.weight)


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name, default in (("steps", 30), ("warmup", 5), ("rounds", 2), ("batch-size", 16), ("seq", 1024),
                          ("layers", 12), ("width", 768), ("heads", 12), ("vocab", 50304)):
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--peak-tflops", type=float, default=989.0)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--tiny", action="store_true", help="a 2-layer width-64 model on the CPU for 2 steps")
    a = p.parse_args()
    if a.tiny:
        a.steps, a.warmup, a.rounds, a.batch_size, a.seq, a.layers, a.width, a.heads = 2, 1, 1, 4, 32, 2, 64, 2
        a.vocab, a.device = 256, "cpu"
    for name in ("steps", "warmup", "rounds", "batch_size", "layers", "width", "heads"):
        if getattr(a, name) < 1:
            p.error("--%s must be >= 1, got %d" % (name.replace("_", "-"), getattr(a, name)))
    if a.width % a.heads:
        p.error("--width %d is not a multiple of --heads %d" % (a.width, a.heads))
    if a.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda, but PyTorch sees no GPU; use --device cpu (or --tiny)")
    return a


def main():
    a = parse()
    device = torch.device(a.device)
    batches = a.warmup + a.steps
    gen = torch.Generator().manual_seed(1234)
    tokens = torch.randint(a.vocab, (batches * a.batch_size, a.seq + 1), generator=gen)
    x_all, y_all = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    if device.type == "cuda":
        x_all, y_all = x_all.pin_memory(), y_all.pin_memory()

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    best = float("inf")
    fused = device.type == "cuda"
    for r in range(a.rounds):
        torch.manual_seed(42)
        net = Gpt(a).to(device)
        opt = torch.optim.AdamW(net.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, eps=1e-8,
                                **({"fused": True} if fused else {}))
        start = time.perf_counter()
        for i in range(batches):
            if i == a.warmup:
                sync()
                start = time.perf_counter()
            x = x_all[i * a.batch_size:(i + 1) * a.batch_size].to(device, non_blocking=True)
            y = y_all[i * a.batch_size:(i + 1) * a.batch_size].to(device, non_blocking=True)
            with torch.autocast(device.type, dtype=torch.bfloat16):
                logits = net(x)
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        sync()
        seconds = time.perf_counter() - start
        best = min(best, seconds)
        print("gpu_lm.py: round %d: %.0f tokens/s (final loss %.4f)"
              % (r + 1, a.steps * a.batch_size * a.seq / seconds, loss.item()))
    n = sum(p.numel() for p in net.parameters()) - net.wpe.weight.numel()
    flops_per_token = 6.0 * n + 12.0 * a.layers * a.width * a.seq
    tps = a.steps * a.batch_size * a.seq / best
    print("gpu_lm.py: torch %s, %.1fM parameters, batch %d x %d, bf16 autocast, AdamW%s, on %s: %.0f tokens/s "
          "(MFU %.1f%% of %.0f TFLOP/s)" % (torch.__version__, (n + net.wpe.weight.numel()) / 1e6, a.batch_size, a.seq,
                                            " fused" if fused else "", device, tps,
                                            100 * tps * flops_per_token / (a.peak_tflops * 1e12), a.peak_tflops))
    print("RESULT gpu_lm.py tokens_per_s=%.1f flops_per_token=%.6g" % (tps, flops_per_token))


if __name__ == "__main__":
    main()
