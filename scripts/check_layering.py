#!/usr/bin/env python3
"""Checks every #include of the library folders against the layer table (ctest `layering`).

The build refuses a forbidden include only where the include path can: a folder's headers are
visible to it when it may use them *or* when a folder it uses does (crypto/ sees methods/ through
protocol/), and a relative "../node/x.h" bypasses include paths altogether. This check sees the
includes as written, so it catches both.

Usage: check_layering.py SOURCE_DIR --uses FOLDER=DEP,DEP ... [--exception FILE=DEP ...]
                         [--external PREFIX=FOLDER,FOLDER ...]
CMakeLists.txt passes the same table it links the per-folder libraries with.
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def parse_table(items):
    table = {}
    for item in items:
        key, _, value = item.partition("=")
        table[key] = {v for v in value.split(",") if v}
    return table


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("source_dir")
    parser.add_argument("--uses", action="append", default=[])
    parser.add_argument("--exception", action="append", default=[])
    parser.add_argument("--external", action="append", default=[])
    args = parser.parse_args()

    root = os.path.realpath(args.source_dir)
    uses = parse_table(args.uses)
    exceptions = parse_table(args.exception)
    external = parse_table(args.external)
    folders = set(uses)

    problems = []
    checked = 0
    for folder in sorted(folders):
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for name in sorted(names):
                if not name.endswith((".h", ".cpp")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                allowed = uses[folder] | exceptions.get(rel, set()) | {folder}
                with open(path, encoding="utf-8") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        checked += 1
                        bracket, target = m.groups()
                        close = ">" if bracket == "<" else '"'
                        where = f"{rel}:{number}: #include {bracket}{target}{close}"
                        # Third-party headers that belong to some folders only.
                        for prefix, owners in external.items():
                            if target.startswith(prefix) and folder not in owners:
                                problems.append(f"{where}: {folder}/ may not use {prefix}* "
                                                f"(only {', '.join(sorted(owners))})")
                        # Resolve as the compiler would: next to the file first, then from the root.
                        beside = os.path.normpath(os.path.join(dirpath, target))
                        resolved = beside if bracket == '"' and os.path.exists(beside) \
                            else os.path.normpath(os.path.join(root, target))
                        inside = os.path.relpath(resolved, root)
                        if inside.startswith(".."):
                            continue
                        top = inside.split(os.sep)[0]
                        if os.sep not in inside or (not os.path.exists(resolved) and top not in folders):
                            continue  # a system header written with quotes
                        if top not in allowed:
                            problems.append(f"{where}: {folder}/ may not use {top}/ "
                                            f"(it may use {', '.join(sorted(uses[folder])) or 'no other folder'})")
    for p in problems:
        print(p, file=sys.stderr)
    print(f"layering: {checked} includes in {', '.join(sorted(folders))}: "
          f"{len(problems)} forbidden")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
