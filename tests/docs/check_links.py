#!/usr/bin/env python3
"""Every relative link of every Markdown file in the repository resolves: the file (or folder)
exists inside the repository, and a #fragment names a heading of the target file.

usage: check_links.py REPO_ROOT"""
import os
import re
import subprocess
import sys

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path):
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    in_code = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                in_code = not in_code
            m = None if in_code else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                a = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
                out.add(a)
    return out


def markdown_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "--cached", "--others",
                              "--exclude-standard", "*.md"], check=True,
                             capture_output=True, text=True).stdout.split()
        if out:
            return [os.path.join(root, p) for p in out]
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(".") and x != "build"]
        found += [os.path.join(d, f) for f in files if f.endswith(".md")]
    return found


def main():
    root = os.path.realpath(sys.argv[1])
    bad = 0
    files = markdown_files(root)
    for md in files:
        in_code = False
        with open(md, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if line.lstrip().startswith("```"):
                    in_code = not in_code
                if in_code:
                    continue
                for m in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
                    target = m.group(1) or m.group(2)
                    if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                        continue  # http:, https:, mailto:
                    path, _, frag = target.partition("#")
                    dest = os.path.realpath(os.path.join(os.path.dirname(md), path)) if path else md
                    rel = os.path.relpath(md, root)
                    if not (dest == root or dest.startswith(root + os.sep)):
                        print(f"{rel}:{n}: {target} leaves the repository")
                        bad += 1
                    elif not os.path.exists(dest):
                        print(f"{rel}:{n}: {target} does not exist")
                        bad += 1
                    elif frag and dest.endswith(".md") and frag not in anchors(dest):
                        print(f"{rel}:{n}: {target}: no heading #{frag}")
                        bad += 1
    print(f"{len(files)} Markdown files, {bad} broken link(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
