#!/usr/bin/env python3
"""Kiln's time of each bench_ops row on the device as it is against the same row under a device
profile (KILN_PROFILE, docs/gpus.md): how much a row slows down when the device has no 8/16-bit
storage, no 64-bit integers and small workgroups. Reads the two KILN_BENCH_JSON files of
bench_ops runs in the same session (bench/run.sh makes them) and prints one table.

usage: profile_compare.py <default.json> <profile.json> <profile name>
"""
import json
import sys


def rows(path):
    with open(path) as f:
        data = json.load(f)
    out = {}
    for r in data["rows"]:
        if r.get("kiln_ms") is not None and r.get("status") == "ok":
            out.setdefault(r.get("id", r["case"]), r)  # a case's first row (the others share Kiln's time)
    return data.get("device", "?"), out


def main():
    if len(sys.argv) != 4:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    device, base = rows(sys.argv[1])
    _, prof = rows(sys.argv[2])
    name = sys.argv[3]
    print(f"bench_ops on {device}: Kiln's time per row, as the device is and under {name}")
    print(f"{'case':40} {'default ms':>11} {name + ' ms':>16} {'slowdown':>9}")
    for key, r in base.items():
        p = prof.get(key)
        case = r["case"]
        if p is None:
            print(f"{case:40} {r['kiln_ms']:11.3f} {'-':>16} {'-':>9}  (failed or skipped under {name})")
            continue
        ratio = p["kiln_ms"] / r["kiln_ms"] if r["kiln_ms"] else float("nan")
        print(f"{case:40} {r['kiln_ms']:11.3f} {p['kiln_ms']:16.3f} {ratio:9.2f}")
    print("slowdown: the row's time under the profile over its time on the device as it is (both "
          "medians of the same repetitions; the references are not affected by profiles)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
