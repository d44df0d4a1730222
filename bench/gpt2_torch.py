#!/usr/bin/python3
"""PyTorch's side of bench/bench_gpt2.c: GPT-2 (the architecture of examples/gpt2_model.c) on
the CPU with torch.set_num_threads(2), weights read from the safetensors file the benchmark
wrote (numpy; no safetensors package), a KV cache of the same layout.

    gpt2_torch.py MODEL.safetensors --prompt 128 --decode 256 [--heads 12] [--logits OUT.bin]

The prompt is ids (i * 7919) % vocab, decode step j feeds (j * 104729) % vocab (the ids
bench_gpt2 feeds Kiln). Prints one line per figure: "first_token_ms", "prefill_ms" (the median
of --reps prefills after the first), "decode_ms" (the median ms per decode step over the
positions after the prompt) and "decode_tokens_per_s"; --logits writes the prompt's last
logits (f32) for the benchmark to compare with Kiln's."""
import argparse
import json
import math
import statistics
import struct
import time

import numpy as np
import torch

DTYPES = {"F32": np.float32, "F16": np.float16}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        a = np.frombuffer(data[b:end], dtype=DTYPES[e["dtype"]]).reshape(e["shape"])
        out[name[12:] if name.startswith("transformer.") else name] = torch.from_numpy(
            a.astype(np.float32))
    return out, header.get("__metadata__", {})


class GPT2:
    def __init__(self, w, heads):
        self.w, self.heads = w, heads
        self.layers = 1 + max(int(k.split(".")[1]) for k in w if k.startswith("h."))
        self.d = w["wte.weight"].shape[1]
        self.n_ctx = w["wpe.weight"].shape[0]
        hd = self.d // heads
        self.k = [torch.zeros(heads, self.n_ctx, hd) for _ in range(self.layers)]
        self.v = [torch.zeros(heads, self.n_ctx, hd) for _ in range(self.layers)]
        self.pos = 0

    def step(self, ids):
        w, t, d, H = self.w, len(ids), self.d, self.heads
        hd, p = d // H, self.pos
        ln = torch.nn.functional.layer_norm
        x = w["wte.weight"][torch.tensor(ids)] + w["wpe.weight"][p:p + t]
        for i in range(self.layers):
            q = "h.%d." % i
            h = ln(x, (d,), w[q + "ln_1.weight"], w[q + "ln_1.bias"], 1e-5)
            qkv = torch.addmm(w[q + "attn.c_attn.bias"], h, w[q + "attn.c_attn.weight"])
            qh, kh, vh = (z.view(t, H, hd).transpose(0, 1) for z in qkv.split(d, dim=1))
            self.k[i][:, p:p + t] = kh
            self.v[i][:, p:p + t] = vh
            k, v = self.k[i][:, :p + t], self.v[i][:, :p + t]
            s = (qh @ k.transpose(1, 2)) * (1.0 / math.sqrt(hd))
            if t > 1:
                s = s + torch.full((t, p + t), float("-inf")).triu(p + 1)
            a = (torch.softmax(s, -1) @ v).transpose(0, 1).reshape(t, d)
            x = x + torch.addmm(w[q + "attn.c_proj.bias"], a, w[q + "attn.c_proj.weight"])
            h = ln(x, (d,), w[q + "ln_2.weight"], w[q + "ln_2.bias"], 1e-5)
            h = torch.nn.functional.gelu(
                torch.addmm(w[q + "mlp.c_fc.bias"], h, w[q + "mlp.c_fc.weight"]),
                approximate="tanh")
            x = x + torch.addmm(w[q + "mlp.c_proj.bias"], h, w[q + "mlp.c_proj.weight"])
        x = ln(x[-1:], (d,), w["ln_f.weight"], w["ln_f.bias"], 1e-5)
        self.pos += t
        return (x @ w["wte.weight"].T)[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--decode", type=int, default=256)
    ap.add_argument("--heads", type=int, default=0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--logits")
    a = ap.parse_args()
    torch.set_num_threads(2)
    w, meta = read_safetensors(a.model)
    heads = a.heads or int(meta.get("n_head", 12))
    m = GPT2(w, heads)
    vocab = w["wte.weight"].shape[0]
    prompt = [(i * 7919) % vocab for i in range(a.prompt)]
    with torch.no_grad():
        t0 = time.perf_counter()
        logits = m.step(prompt)
        first = (time.perf_counter() - t0) * 1e3
        if a.logits:
            logits.numpy().astype("<f4").tofile(a.logits)
        times = []
        for j in range(1, a.decode + 1):
            t0 = time.perf_counter()
            m.step([(j * 104729) % vocab])
            times.append((time.perf_counter() - t0) * 1e3)
        prefills = []
        for _ in range(a.reps):
            m.pos = 0
            t0 = time.perf_counter()
            m.step(prompt)
            prefills.append((time.perf_counter() - t0) * 1e3)
    print("first_token_ms %.3f" % first)
    print("prefill_ms %.3f" % statistics.median(prefills))
    if times:
        print("decode_ms %.3f" % statistics.median(times))
        print("decode_tokens_per_s %.3f" % (len(times) / (sum(times) / 1e3)))


if __name__ == "__main__":
    main()
