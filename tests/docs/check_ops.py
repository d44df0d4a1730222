#!/usr/bin/env python3
"""docs/ops.md names every call the public headers declare, and no name they lack.

usage: check_ops.py REPO_ROOT"""
import os
import re
import sys

HEADERS = ["include/kiln/kiln.h", "include/kiln/kiln_vulkan.h", "include/kiln/kiln_safetensors.h",
           "base/kiln_base.h"]


def main():
    root = sys.argv[1]
    declared, names = set(), set()
    for h in HEADERS:
        text = re.sub(r"/\*.*?\*/", "", open(os.path.join(root, h)).read(), flags=re.S)
        declared |= set(re.findall(r"\b(kiln_[a-z0-9_]+)\s*\(", text))
        names |= set(re.findall(r"\b(kiln_[a-z0-9_]+)\b", text))  # types too
    declared.discard("kiln_alloc_fn")
    declared.discard("kiln_log_fn")
    ops = open(os.path.join(root, "docs", "ops.md")).read()
    named = set(re.findall(r"`(kiln_[a-z0-9_]+)`", ops))
    missing, extra = sorted(declared - named), sorted(named - names)
    for m in missing:
        print(f"docs/ops.md: {m} is not listed")
    for e in extra:
        print(f"docs/ops.md: {e} is declared in no public header")
    print(f"{len(declared)} public calls, {len(missing)} missing, {len(extra)} unknown")
    return 1 if missing or extra else 0


if __name__ == "__main__":
    sys.exit(main())
