#!/usr/bin/env python3
"""Checks every #include of the library folders against the layer table (ctest `layering`).

The build refuses a forbidden include only where the include path can: a folder's headers are
visible to it when it may use them *or* when a folder it uses does (crypto/ sees methods/ through
protocol/), and a relative "../node/x.h" bypasses include paths altogether. This check sees the
includes as written, so it catches both.

A file may be held to less than its folder: `--forbid GLOB=FOLDER,...` refuses any file matching
GLOB whose includes lead, directly or through other headers of the repository, to FOLDER/ (the node
machine is wire-free: node/machine.* may not reach protocol/ by any path).

Usage: check_layering.py SOURCE_DIR --uses FOLDER=DEP,DEP ... [--exception FILE=DEP ...]
                         [--external PREFIX=FOLDER,FOLDER ...] [--forbid GLOB=FOLDER,FOLDER ...]
CMakeLists.txt passes the same table it links the per-folder libraries with.
"""
import glob
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


def repository_includes(root, rel):
    """The repository headers `rel` includes with quotes, as the compiler resolves them."""
    found = []
    path = os.path.join(root, rel)
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = INCLUDE.match(line)
            if not m or m.group(1) != '"':
                continue
            for candidate in (os.path.join(os.path.dirname(path), m.group(2)), os.path.join(root, m.group(2))):
                candidate = os.path.normpath(candidate)
                if os.path.isfile(candidate) and not os.path.relpath(candidate, root).startswith(".."):
                    found.append(os.path.relpath(candidate, root))
                    break
    return found


def forbidden_reach(root, rules):
    """Files of a --forbid rule whose include closure reaches a folder the rule names."""
    problems = []
    for rule in rules:
        pattern, _, value = rule.partition("=")
        banned = {v for v in value.split(",") if v}
        for path in sorted(glob.glob(os.path.join(root, pattern))):
            start = os.path.relpath(path, root)
            chains = {start: [start]}
            frontier = [start]
            while frontier:
                here = frontier.pop(0)
                for target in repository_includes(root, here):
                    if target in chains:
                        continue
                    chains[target] = chains[here] + [target]
                    if target.split(os.sep)[0] in banned:
                        problems.append(f"{start}: reaches {target} through {' > '.join(chains[target])}: "
                                        f"{pattern} may not use {target.split(os.sep)[0]}/")
                    else:
                        frontier.append(target)
    return problems


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("source_dir")
    parser.add_argument("--uses", action="append", default=[])
    parser.add_argument("--exception", action="append", default=[])
    parser.add_argument("--external", action="append", default=[])
    parser.add_argument("--forbid", action="append", default=[])
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
    problems += forbidden_reach(root, args.forbid)
    for p in problems:
        print(p, file=sys.stderr)
    print(f"layering: {checked} includes in {', '.join(sorted(folders))}: "
          f"{len(problems)} forbidden")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
