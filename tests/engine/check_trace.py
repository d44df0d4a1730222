#!/usr/bin/env python3
"""Checks a KILN_TRACE file: python3 check_trace.py FILE DISPATCHES device|interp.

The file parses as JSON (a complete trace-event array, as kiln_context_destroy leaves it); every
event has the fields Perfetto and chrome://tracing need; each of the DISPATCHES kernels is
present once, by name (on the device track when the device has timestamps, on the host track
with the interpreter, which has no device track); the host phases are there (graph build:
the program's calls before a realize); kernels come in
dispatch order with non-decreasing times, and each lies within its realize (host) or after its
batch's submit began (device)."""
import json
import sys

path, dispatches, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(path) as f:
    events = json.load(f)
assert isinstance(events, list), "not a trace-event array"
spans = [e for e in events if e["ph"] == "X"]
for e in spans:
    for key in ("name", "cat", "pid", "tid", "ts", "dur"):
        assert key in e, f"event without {key}: {e}"
    assert e["ts"] >= 0 and e["dur"] >= 0, f"negative time: {e}"
threads = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
kernels = [e for e in spans if e["cat"] == "kernel"]
assert len(kernels) == dispatches, f"{len(kernels)} kernel events for {dispatches} dispatches"
for k in kernels:
    assert k["name"][:2] in ("E_", "R_", "C_", "W_"), f"kernel name {k['name']}"
    assert len(k["args"]["hash"]) == 16 and k["args"]["invocations"] > 0
cats = {e["cat"] for e in spans}
for phase in ("graph", "realize", "schedule", "codegen"):
    assert phase in cats, f"no {phase} phase"
realizes = sorted((e for e in spans if e["cat"] == "realize"), key=lambda e: e["ts"])
for g in (e for e in spans if e["cat"] == "graph"):  # the program's calls before a realize
    assert g["name"] == "graph build" and g["args"]["calls"] > 0, f"graph span {g}"
    assert any(r["ts"] >= g["ts"] + g["dur"] - 1e-3 for r in realizes), f"{g} after every realize"
starts = [k["ts"] for k in kernels]
assert starts == sorted(starts), "kernels out of order"
for a, b in zip(kernels, kernels[1:]):
    assert a["ts"] + a["dur"] <= b["ts"] + 1e-3, f"{a['name']} overlaps {b['name']}"
if mode == "interp":
    assert set(threads) == {1}, f"tracks {threads}: the interpreter has no device track"
    assert all(k["tid"] == 1 for k in kernels)
    for k in kernels:  # run inside a realize
        assert any(r["ts"] <= k["ts"] and k["ts"] + k["dur"] <= r["ts"] + r["dur"] + 1e-3
                   for r in realizes), f"{k['name']} outside every realize"
else:
    assert threads.get(2, "").startswith("device: "), f"tracks {threads}"
    assert all(k["tid"] == 2 for k in kernels), "device kernels on the host track"
    for phase in ("pipeline", "submit", "wait"):
        assert phase in cats, f"no {phase} phase"
    submits = sorted(e["ts"] for e in spans if e["cat"] == "submit")
    for k in kernels:
        assert any(s <= k["ts"] + 1e-3 for s in submits), f"{k['name']} before any submit"
print(f"{path}: {len(kernels)} kernels, {len(spans)} spans, ok")
