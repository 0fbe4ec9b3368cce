#!/usr/bin/env python3
"""The per-file rule of scripts/check_layering.py refuses what it should (ctest `layering_forbid`).

A node/ file may use protocol/, but node/machine.* may not, by any path: a machine header that
reaches protocol/messages.h through another node/ header must fail the check, naming the path,
and the same tree without that include must pass.
"""
import os
import subprocess
import sys
import tempfile

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "check_layering.py")


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def check(root):
    return subprocess.run([sys.executable, CHECK, root, "--uses", "protocol=", "--uses", "node=protocol",
                           "--forbid", "node/machine.*=protocol"], capture_output=True, text=True)


def main():
    with tempfile.TemporaryDirectory() as root:
        write(root, "protocol/messages.h", "#pragma once\n")
        write(root, "node/helper.h", '#pragma once\n#include "protocol/messages.h"\n')
        write(root, "node/machine.h", '#pragma once\n#include "node/helper.h"\n')
        write(root, "node/machine.cpp", '#include "node/machine.h"\n')
        bad = check(root)
        expected = "node/machine.h: reaches protocol/messages.h through node/machine.h > node/helper.h > protocol/messages.h"
        if bad.returncode != 1 or expected not in bad.stderr:
            print(f"a machine reaching protocol/ was not refused as expected (exit {bad.returncode}):\n{bad.stderr}")
            return 1
        write(root, "node/machine.h", "#pragma once\n")
        good = check(root)
        if good.returncode != 0:
            print(f"a wire-free machine was refused (exit {good.returncode}):\n{good.stderr}")
            return 1
    print("layering_forbid: a machine that reaches protocol/ through node/helper.h is refused; without it, passes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
