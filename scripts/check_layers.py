#!/usr/bin/env python3
"""Source check: no layer includes a layer above it.

Tessel's sources are a stack of layers, one folder each under src/ with its public headers under
include/tessel/<layer>/ (docs/architecture.md draws the stack). A layer may include its own headers
and those of the layers below it, never those above: this script exits 1 listing every include
that points up (`file:line: <layer> includes <higher layer>: text`), every relative include that
leaves its layer's folder, and every source folder or header folder that is not a layer of the
stack (a new folder must take its place in LAYERS first).

  check_layers.py ROOT         scan ROOT's src/ and include/tessel/ (exit 0: clean, 1: findings)
  check_layers.py --self-test  checks the checker on small trees that must and must not fail
"""

import os
import re
import sys
import tempfile

# Bottom up: each layer may include itself and the layers before it.
LAYERS = ["core", "comm", "kernels", "datasets", "partition", "sampling", "nn", "dist", "train",
          "modes", "cli"]
RANK = {name: i for i, name in enumerate(LAYERS)}
EXTENSIONS = (".cpp", ".hpp", ".cu", ".cuh", ".h", ".cc")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def layer_files(root):
    """(layer, path relative to root, absolute path) of every source and header; findings for
    folders that are no layer."""
    files, findings = [], []
    for top, prefix in (("src", ""), (os.path.join("include", "tessel"), "")):
        base = os.path.join(root, top)
        if not os.path.isdir(base):
            continue
        for layer in sorted(os.listdir(base)):
            folder = os.path.join(base, layer)
            if not os.path.isdir(folder):
                continue
            if layer not in RANK:
                findings.append(f"{os.path.join(top, layer)}: a folder that is no layer of the "
                                f"stack ({', '.join(LAYERS)})")
                continue
            for dirpath, _, names in os.walk(folder):
                for name in sorted(names):
                    if name.endswith(EXTENSIONS):
                        path = os.path.join(dirpath, name)
                        files.append((layer, os.path.relpath(path, root), path))
    return files, findings


def scan(root):
    files, findings = layer_files(root)
    for layer, rel, path in files:
        layer_root = os.path.abspath(os.path.join(root, "src", layer))
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = m.group(1)
                if target.startswith("tessel/"):
                    parts = target.split("/")
                    other = parts[1] if len(parts) > 2 else ""
                    if other not in RANK:
                        findings.append(f"{rel}:{number}: includes {target}, which is in no "
                                        f"layer: {line.strip()}")
                    elif RANK[other] > RANK[layer]:
                        findings.append(f"{rel}:{number}: {layer} includes {other}, a layer "
                                        f"above it: {line.strip()}")
                elif ".." in target.split("/"):
                    resolved = os.path.abspath(os.path.join(os.path.dirname(path), target))
                    inside = os.path.commonpath([resolved, layer_root]) == layer_root
                    if not inside:
                        findings.append(f"{rel}:{number}: a relative include that leaves "
                                        f"src/{layer}: {line.strip()}")
    return findings


def self_test():
    cases = [
        # (files: path -> text, expected number of findings, what it shows)
        ({"src/core/a.cpp": '#include "tessel/core/a.hpp"\n',
          "src/nn/b.cpp": '#include "tessel/kernels/k.hpp"\n#include "tessel/nn/b.hpp"\n',
          "include/tessel/train/t.hpp": '#include "tessel/dist/halo.hpp"\n'}, 0,
         "includes of the same and lower layers"),
        ({"src/kernels/cpu/spmm.cpp": '#include "../check.hpp"\n'}, 0,
         "a relative include inside its layer"),
        ({"src/nn/b.cpp": '#include "tessel/train/train.hpp"\n'}, 1, "nn includes train"),
        ({"include/tessel/core/x.hpp": '  #  include "tessel/comm/c.hpp"\n'}, 1,
         "a public core header includes comm"),
        ({"src/dist/h.cpp": '#include "../modes/full/full.hpp"\n'}, 1,
         "a relative include into another layer's folder"),
        ({"src/extra/e.cpp": "int e;\n"}, 1, "a source folder that is no layer"),
        ({"src/cli/m.cpp": '#include "tessel/gui/w.hpp"\n'}, 1, "a header of no layer"),
    ]
    failures = 0
    for files, expected, what in cases:
        with tempfile.TemporaryDirectory() as root:
            for rel, text in files.items():
                path = os.path.join(root, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
            found = scan(root)
            if len(found) != expected:
                failures += 1
                print(f"self-test: {what}: expected {expected} finding(s), got {found}")
    print(f"self-test: {len(cases)} cases, {failures} failures")
    return 1 if failures else 0


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    findings = scan(argv[1])
    for finding in findings:
        print(finding)
    print(f"check_layers: {len(findings)} finding(s) in {argv[1]}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
