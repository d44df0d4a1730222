#!/usr/bin/python3
"""Writes the safetensors files the tests read, by hand (Debian packages no safetensors
module), laid out as the reference writer lays them out: keys sorted, the header padded with
spaces to a multiple of 8, tensors packed in header order.

  tests/io/fixtures/small.safetensors      read by tests/io/test_safetensors.c
  tests/fuzz/corpus_safetensors/seed-*     the seeds of tests/fuzz/fuzz_safetensors.c

usage: /usr/bin/python3 tests/io/gen_safetensors.py (from the repository root; needs numpy and
torch, for bfloat16)."""
import json
import os
import struct

import numpy as np
import torch


def bf16_bytes(values):
    t = torch.tensor(values, dtype=torch.float32).to(torch.bfloat16)
    return t.view(torch.int16).numpy().astype("<i2").tobytes()


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, bytes)]."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def small():
    # The values the C test recomputes: (i - 3) / 4 for element i, and their F16/BF16 forms.
    ramp = (np.arange(6, dtype=np.float32) - 3) / 4
    return safetensors([
        ("embed.weight", "F32", (2, 3), ramp.astype("<f4").tobytes()),
        ("half", "F16", (6,), ramp.astype("<f2").tobytes()),
        ("brain", "BF16", (3, 2), bf16_bytes(ramp.tolist())),
        ("ids", "I64", (3,), np.array([1, -2, 1 << 40], dtype="<i8").tobytes()),
        ("mask", "BOOL", (2,), bytes([1, 0])),
        ("empty", "F32", (0, 4), b""),
        ("scalar", "F32", (), np.float32(2.5).tobytes()),
    ], metadata={"format": "pt", "source": "gen_safetensors.py"})


def seeds():
    f32 = np.arange(4, dtype="<f4").tobytes()
    return {
        "seed-small": small(),
        "seed-f32": safetensors([("w", "F32", (2, 2), f32)]),
        "seed-f16-bf16": safetensors([("a", "F16", (2,), np.ones(2, "<f2").tobytes()),
                                      ("b", "BF16", (1, 2), bf16_bytes([1.5, -2.0]))],
                                     metadata={"k": "v"}),
        "seed-ints": safetensors([("i8", "I8", (3,), bytes([1, 255, 7])),
                                  ("u32", "U32", (1,), struct.pack("<I", 7)),
                                  ("f64", "F64", (1,), struct.pack("<d", 1.0))]),
        "seed-empty": safetensors([]),
        "seed-metadata-only": safetensors([], metadata={"a": "b", "c": ""}),
    }


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "tests/io/fixtures/small.safetensors"), "wb") as f:
        f.write(small())
    corpus = os.path.join(root, "tests/fuzz/corpus_safetensors")
    os.makedirs(corpus, exist_ok=True)
    for name, data in seeds().items():
        with open(os.path.join(corpus, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
