#!/usr/bin/python3
"""Writes the tiny GPT-2 fixture of tests/examples/test_gpt2.c (run with Debian's python3, which
has torch and numpy; nothing else is needed):

  data/gpt2_tiny.safetensors  a random GPT-2 (2 layers, d 64, 4 heads, vocabulary 256, context
                              128) laid out and named as the published GPT-2 files (Conv1D
                              weights (in, out), the h.N.attn.bias mask buffers included), F32,
                              metadata n_head = "4"; the format written by hand: an 8-byte
                              little-endian header length, the JSON header, the raw data
  gpt2_tiny_ref.h             the prompt, then the logits of its prefill (last position) and of
                              32 greedy decode steps, and the ids chosen, computed in float64

    /usr/bin/python3 tests/examples/gen_gpt2_tiny.py && clang-format -i tests/examples/gpt2_tiny_ref.h
"""
import json
import math
import os
import struct

import numpy as np
import torch

LAYERS, D, HEADS, VOCAB, CTX = 2, 64, 4, 256, 128
PROMPT = [15, 200, 3, 77, 128, 5, 250]
DECODE_STEPS = 32
HERE = os.path.dirname(os.path.abspath(__file__))


def make_weights(seed):
    """Random weights, scaled so that logits spread (distinct greedy choices) but stay O(10)."""
    g = torch.Generator().manual_seed(seed)

    def randn(*shape, std):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * std).float()

    w = {"wte.weight": randn(VOCAB, D, std=0.25), "wpe.weight": randn(CTX, D, std=1.0)}
    for i in range(LAYERS):
        p = "h.%d." % i
        w[p + "ln_1.weight"] = 1 + randn(D, std=0.1)
        w[p + "ln_1.bias"] = randn(D, std=0.1)
        # The published files keep the causal mask buffer; readers skip it.
        w[p + "attn.bias"] = torch.tril(torch.ones(CTX, CTX)).view(1, 1, CTX, CTX)
        w[p + "attn.c_attn.weight"] = randn(D, 3 * D, std=0.15)
        w[p + "attn.c_attn.bias"] = randn(3 * D, std=0.1)
        w[p + "attn.c_proj.weight"] = randn(D, D, std=0.1)
        w[p + "attn.c_proj.bias"] = randn(D, std=0.1)
        w[p + "ln_2.weight"] = 1 + randn(D, std=0.1)
        w[p + "ln_2.bias"] = randn(D, std=0.1)
        w[p + "mlp.c_fc.weight"] = randn(D, 4 * D, std=0.15)
        w[p + "mlp.c_fc.bias"] = randn(4 * D, std=0.1)
        w[p + "mlp.c_proj.weight"] = randn(4 * D, D, std=0.08)
        w[p + "mlp.c_proj.bias"] = randn(D, std=0.1)
    w["ln_f.weight"] = 1 + randn(D, std=0.1)
    w["ln_f.bias"] = randn(D, std=0.1)
    return w


def write_safetensors(path, tensors, metadata):
    """safetensors: u64 LE header size, a JSON header {name: {dtype, shape, data_offsets}},
    the tensors' bytes (row-major, little-endian) back to back."""
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        data = t.detach().contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as the library's writer does
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def gpt2_logits(w, ids, heads, past=None):
    """GPT-2 forward over ids (positions len(past)..) in float64; returns the logits of every
    position and the new per-layer (K, V) cache. The reference for Kiln's examples/gpt2_model.c."""
    w = {k: v.double() for k, v in w.items()}
    t = len(ids)
    start = 0 if past is None else past[0][0].shape[1]
    x = w["wte.weight"][torch.tensor(ids)] + w["wpe.weight"][start:start + t]
    d = x.shape[1]
    hd = d // heads
    cache = []
    for i in range(LAYERS):
        p = "h.%d." % i
        h = torch.nn.functional.layer_norm(x, (d,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5)
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = (z.view(t, heads, hd).transpose(0, 1) for z in qkv.split(d, dim=1))
        if past is not None:
            k = torch.cat([past[i][0], k], 1)
            v = torch.cat([past[i][1], v], 1)
        cache.append((k, v))
        s = q @ k.transpose(1, 2) / math.sqrt(hd)
        n = k.shape[1]
        mask = torch.ones(t, n, dtype=torch.bool).tril(n - t)
        s = s.masked_fill(~mask, float("-inf"))
        a = (torch.softmax(s, -1) @ v).transpose(0, 1).reshape(t, d)
        x = x + a @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = torch.nn.functional.layer_norm(x, (d,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5)
        h = torch.nn.functional.gelu(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"],
                                     approximate="tanh")
        x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = torch.nn.functional.layer_norm(x, (d,), w["ln_f.weight"], w["ln_f.bias"], 1e-5)
    return x @ w["wte.weight"].T, cache


def c_floats(name, rows):
    out = ["static const float %s[%d][%d] = {" % (name, len(rows), len(rows[0]))]
    for r in rows:
        out.append("    {" + ", ".join("%.9gf" % v for v in r) + "},")
    out.append("};")
    return "\n".join(out)


def main():
    w = make_weights(22)
    write_safetensors(os.path.join(HERE, "data", "gpt2_tiny.safetensors"), w,
                      {"format": "pt", "n_head": str(HEADS)})
    logits, cache = gpt2_logits(w, PROMPT, HEADS)
    rows, ids = [logits[-1]], []
    # The whole sequence at once must agree with the cached decode (checks the reference itself).
    seq = list(PROMPT)
    for _ in range(DECODE_STEPS):
        ids.append(int(torch.argmax(rows[-1])))
        seq.append(ids[-1])
        logits, cache = gpt2_logits(w, [ids[-1]], HEADS, cache)
        rows.append(logits[-1])
    full, _ = gpt2_logits(w, seq, HEADS)
    assert torch.allclose(full[len(PROMPT) - 1:], torch.stack(rows), atol=1e-9)
    # Greedy choices far from ties, so that f32 rounding cannot change them.
    gaps = [float(torch.topk(r, 2).values[0] - torch.topk(r, 2).values[1]) for r in rows]
    assert min(gaps) > 1e-3, min(gaps)
    with open(os.path.join(HERE, "gpt2_tiny_ref.h"), "w") as f:
        f.write("/* Generated by tests/examples/gen_gpt2_tiny.py: do not edit. The logits (float64,\n"
                " * rounded to f32) of data/gpt2_tiny.safetensors for the prompt's last position and\n"
                " * for %d greedy decode steps, and the ids chosen; the smallest gap between the\n"
                " * largest two logits of a row is %.3g. */\n" % (DECODE_STEPS, min(gaps)))
        f.write("#ifndef KILN_TESTS_EXAMPLES_GPT2_TINY_REF_H\n#define KILN_TESTS_EXAMPLES_GPT2_TINY_REF_H\n\n")
        f.write("enum { GPT2_TINY_LAYERS = %d, GPT2_TINY_D = %d, GPT2_TINY_HEADS = %d, "
                "GPT2_TINY_VOCAB = %d, GPT2_TINY_CTX = %d, GPT2_TINY_PROMPT = %d, "
                "GPT2_TINY_STEPS = %d };\n\n" % (LAYERS, D, HEADS, VOCAB, CTX, len(PROMPT),
                                                  DECODE_STEPS))
        f.write("static const int32_t gpt2_tiny_prompt[%d] = {%s};\n" %
                (len(PROMPT), ", ".join(map(str, PROMPT))))
        f.write("/* ids[i]: the greedy choice after row i of the logits (row 0: the prompt). */\n")
        f.write("static const int32_t gpt2_tiny_ids[%d] = {%s};\n" %
                (DECODE_STEPS, ", ".join(map(str, ids))))
        f.write(c_floats("gpt2_tiny_logits", [r.float().tolist() for r in rows]) + "\n")
        f.write("\n#endif\n")


if __name__ == "__main__":
    main()
