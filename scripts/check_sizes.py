#!/usr/bin/env python3
"""Refuses functions and files longer than their limits in the given folders (ctest `sizes`).

A long function hides its steps and a long file does more than one thing: docs/architecture.md
keeps node/ and protocol/ under these limits (issue 50). A function is counted from the line of
its opening brace to the line of its closing one, lambdas and nested blocks included; functions
defined in class bodies count too. Comments, preprocessor lines and string literals are skipped
when braces are matched, so a brace in a message does not confuse it. A file is counted in lines.

Usage: check_sizes.py SOURCE_DIR --max-function LINES [--max-file FOLDER=LINES ...]
                      [--file PATH=LINES ...] FOLDER ...
"""
import argparse
import os
import re
import sys

WORD = re.compile(r"\b(namespace|class|struct|union|enum)\b")


def strip_code(text):
    """The text with comments, preprocessor lines, string and character literals blanked, newlines kept."""
    text = re.sub(r"(?m)^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (j - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(text):
    """(name, first line, line count) of every function body in `text`."""
    code = strip_code(text)
    stack = []  # kinds of the open braces: namespace, class, function, block
    since = 0   # where the text leading to the next brace starts
    found = []
    for i, c in enumerate(code):
        if c in ";":
            since = i + 1
        elif c == "{":
            lead = code[since:i]
            inside_function = any(k == "function" for k, _, _ in stack)
            m = WORD.search(lead)
            if inside_function:
                kind = "block"
            elif m and ")" not in lead.split(m.group(1), 1)[0] and "(" not in lead[:m.start()]:
                kind = "namespace" if m.group(1) == "namespace" else "class"
            elif ")" in lead:
                kind = "function"
            else:
                kind = "block"
            if kind == "function":
                name = re.findall(r"([~\w:]+)\s*\(", lead)
                stack.append(("function", name[0] if name else "?", code.count("\n", 0, i) + 1))
            else:
                stack.append((kind, None, None))
            since = i + 1
        elif c == "}":
            if stack:
                kind, name, first = stack.pop()
                if kind == "function":
                    last = code.count("\n", 0, i) + 1
                    found.append((name, first, last - first + 1))
            since = i + 1
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("source_dir")
    parser.add_argument("--max-function", type=int, required=True)
    parser.add_argument("--max-file", action="append", default=[], help="FOLDER=LINES, for every file in it")
    parser.add_argument("--file", action="append", default=[], help="PATH=LINES, a tighter limit for one file")
    parser.add_argument("folders", nargs="+")
    args = parser.parse_args()
    file_limits = {k: int(v) for k, _, v in (item.partition("=") for item in args.file)}
    folder_limits = {k: int(v) for k, _, v in (item.partition("=") for item in args.max_file)}
    long_ones = []
    count = files = 0
    for folder in args.folders:
        for dirpath, _, names in os.walk(os.path.join(args.source_dir, folder)):
            for name in sorted(names):
                if not name.endswith((".h", ".cpp")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, args.source_dir)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                files += 1
                limit = file_limits.get(rel, folder_limits.get(folder))
                lines_in_file = text.count("\n")
                if limit is not None and lines_in_file > limit:
                    long_ones.append(f"{rel}: {lines_in_file} lines, more than {limit}")
                for fn, first, lines in functions(text):
                    count += 1
                    if lines > args.max_function:
                        long_ones.append(f"{rel}:{first}: {fn} is {lines} lines, more than {args.max_function}")
    for line in long_ones:
        print(line, file=sys.stderr)
    print(f"sizes: {files} files and {count} functions in {', '.join(args.folders)}: {len(long_ones)} too long")
    return 1 if long_ones else 0


if __name__ == "__main__":
    sys.exit(main())
