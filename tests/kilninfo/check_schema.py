#!/usr/bin/env python3
"""Validates kilninfo's JSON outputs against tools/kilninfo/kilninfo.schema.json:
python3 check_schema.py KILNINFO SCHEMA. Runs `--json`, `--selftest --json` and `--cache --json`
(over a private cache directory holding one corrupt file), each checked with
python3-jsonschema (Draft 7); exits 0 only when all three are valid."""
import json
import os
import subprocess
import sys
import tempfile

import jsonschema

kilninfo, schema_path = sys.argv[1], sys.argv[2]
with open(schema_path) as f:
    schema = json.load(f)
jsonschema.Draft7Validator.check_schema(schema)


validator_all = jsonschema.Draft7Validator(schema)  # what a user validates against


def validator(definition):
    """The schema's definition for one output (its errors name the key; oneOf's name none)."""
    return jsonschema.Draft7Validator(
        {"definitions": schema["definitions"], "$ref": f"#/definitions/{definition}"})


with tempfile.TemporaryDirectory(prefix="kiln-schema-") as cache:
    with open(os.path.join(cache, "0" * 32 + ".kc"), "w") as f:
        f.write("not a cache file")
    env = dict(os.environ, KILN_CACHE_DIR=cache, ASAN_OPTIONS="detect_leaks=0")
    failed = False
    for args, top, definition in ((["--json"], "devices", "report"),
                                  (["--selftest", "--json"], "selftest", "selftest"),
                                  (["--selftest", "--profile", "mobile-low", "--json"], "selftest",
                                   "selftest"),
                                  (["--cache", "--json"], "cache", "cache")):
        run = subprocess.run([kilninfo, *args], env=env, capture_output=True, text=True)
        out = json.loads(run.stdout)
        assert top in out, f"kilninfo {' '.join(args)}: no {top}"
        assert validator(definition).is_valid(out) == validator_all.is_valid(out)
        errors = sorted(validator(definition).iter_errors(out), key=lambda e: list(e.absolute_path))
        for e in errors:
            where = "/".join(map(str, e.absolute_path))
            print(f"kilninfo {' '.join(args)}: {where}: {e.message[:300]}")
        failed = failed or bool(errors)
        print(f"kilninfo {' '.join(args)}: {'invalid' if errors else 'valid'} (exit {run.returncode})")
sys.exit(1 if failed else 0)
