#!/usr/bin/env python3
"""Refuses code outside a method's folder that names the method or its types (ctest `method_names`).

A method is its folder (docs/architecture.md, "Adding a method"): the rest of fednode reaches it
through the registry (methods/registry.*), its descriptor and the interfaces it implements
(KnowledgeCodec, HeadCodec, KnowledgeBody, OwnOptions). This check reads the code of every
library folder and cli/ -- comments left out, since prose may say what a method is for -- and
refuses an identifier or string that is one of a method's names, outside the places allowed.

Usage: check_method_names.py SOURCE_DIR --method FOLDER=NAME,NAME... [--allow PATH ...]
                             [--except PATH ...] FOLDER...
  --allow PATH    a file or folder (ending in /) that may name any method (the registry)
  --except PATH   a file not yet moved behind the registry: listed, so that it is visible,
                  and refused as soon as it no longer names the method (so that the list shrinks)
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_sizes import strip_code  # noqa: E402  (comments and literals blanked the same way)


def code_and_strings(text):
    """The code without comments, string literals kept (a method's name in a string counts)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("source_dir")
    parser.add_argument("--method", action="append", default=[])
    parser.add_argument("--allow", action="append", default=[])
    parser.add_argument("--except", dest="exceptions", action="append", default=[])
    parser.add_argument("folders", nargs="+")
    args = parser.parse_args()
    root = os.path.realpath(args.source_dir)
    methods = {}
    for item in args.method:
        folder, _, names = item.partition("=")
        methods[folder] = [n for n in names.split(",") if n]
    problems, checked, excepted_seen = [], 0, set()
    for top in args.folders:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".h", ".cpp")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                if any(rel == a or (a.endswith("/") and rel.startswith(a)) for a in args.allow):
                    continue
                with open(os.path.join(root, rel), encoding="utf-8") as f:
                    code = code_and_strings(f.read())
                checked += 1
                for folder, names in methods.items():
                    if rel.startswith(folder.rstrip("/") + "/"):
                        continue
                    for word in names:
                        m = re.search(r"(?<![A-Za-z0-9_])" + re.escape(word) + r"(?![A-Za-z0-9_])", code)
                        if not m:
                            continue
                        line = code.count("\n", 0, m.start()) + 1
                        if rel in args.exceptions:
                            excepted_seen.add(rel)
                            continue
                        problems.append(f"{rel}:{line}: names {word} of {folder}/ (reach it through the registry)")
    for rel in args.exceptions:
        if rel not in excepted_seen:
            problems.append(f"{rel}: listed as an exception but names no method any more: take it off the list")
    for p in problems:
        print(p, file=sys.stderr)
    print(f"method_names: {checked} files, {len(args.exceptions)} listed exceptions: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
