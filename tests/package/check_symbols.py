#!/usr/bin/env python3
"""The libraries export the public API only: every global symbol that libkiln.a or libkiln.so
defines starts with kiln_ (nm), the public calls are there, and libkiln.so has its soname.

usage: check_symbols.py NM READELF libkiln.a libkiln.so SONAME"""
import subprocess
import sys


def defined_globals(nm, args, path):
    out = subprocess.run([nm, *args, "--defined-only", path], check=True,
                         capture_output=True, text=True).stdout
    names = []
    for line in out.splitlines():
        parts = line.split()
        # "ADDRESS TYPE NAME"; an archive adds "kiln.o:" headers and blank lines.
        if len(parts) == 3:
            names.append(parts[2].split("@")[0])
    return names


def main():
    nm, readelf, archive, shared, soname = sys.argv[1:6]
    failed = False
    for path, args in ((archive, ["-g"]), (shared, ["-D"])):
        names = defined_globals(nm, args, path)
        others = sorted(n for n in names if not n.startswith("kiln_"))
        for n in others:
            print(f"{path}: global symbol outside the public API: {n}")
        for want in ("kiln_context_create", "kiln_version", "kiln_context_create_vulkan",
                     "kiln_status_string", "kiln_safetensors_open"):
            if want not in names:
                print(f"{path}: {want} is not exported")
                failed = True
        failed = failed or bool(others)
        print(f"{path}: {len(names)} global symbols, {len(others)} outside kiln_")
    dyn = subprocess.run([readelf, "-d", shared], check=True, capture_output=True,
                         text=True).stdout
    if f"[{soname}]" not in dyn:
        print(f"{shared}: no soname {soname}")
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
