#!/usr/bin/env python3
"""Runs the examples of README.md and checks the output they show.

    readme_test.py TESSEL_BINARY REPO_ROOT [--exact] [--keep]

README.md marks each shell block a user is meant to run with an HTML comment on the line
directly above its fence:

    <!-- runnable -->            the next ```sh block is run by this test
    <!-- not run: REASON -->     the next ```sh block is not (it builds, installs, or needs
                                 machines the test does not have)
    <!-- output -->              the next ``` block is output of the runnable block before it

A ```sh block with neither mark is an error: every command is either run or says why not.

The runnable blocks run in order in one bash session (set -euo pipefail), in a fresh temporary
folder that holds a link `datasets` to REPO_ROOT/datasets (so `datasets/samples/...` is the
shipped data, as the README's convention says), with the folder of TESSEL_BINARY first on PATH.
Open MPI may run as root and oversubscribe, so `mpirun -np 2` runs on any machine; the runs use
one OpenMP thread per rank and no GPU (CUDA_VISIBLE_DEVICES is empty), as the README's outputs
were made.

Every line of an output block, other than a line `...`, must appear in its runnable block's
output (stdout and stderr together). Seconds, phase splits, thread counts, the GEMM library and
the measured bubble are masked, as they vary from run to run and machine to machine; the other
numbers must agree within 1% or 0.005 (other CPUs round differently), or exactly with --exact.
Exits 1 when a block fails or an output line is missing, naming the block and its README line.
--keep keeps the temporary folder.
"""

import os
import re
import subprocess
import sys
import tempfile
import time

RUNNABLE = "<!-- runnable -->"
OUTPUT = "<!-- output -->"
NOT_RUN = re.compile(r"^<!-- not run: .+ -->$")
MARKER = "@@readme-block {} begins@@"


class Block:
    def __init__(self, kind, line, text):
        self.kind = kind  # "run" or "output"
        self.line = line  # 1-based line of the opening fence in README.md
        self.text = text
        self.expected = []  # output blocks that follow this runnable block


def parse(readme):
    """The runnable blocks of README.md, each with the output blocks that follow it."""
    lines = open(readme, encoding="utf-8").read().split("\n")
    blocks, errors = [], []
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if not line.startswith("```"):
            i += 1
            continue
        fence_line = i + 1
        above = lines[i - 1].strip() if i > 0 else ""
        lang = line[3:].strip()
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        if j == len(lines):
            errors.append(f"README.md:{fence_line}: fence never closed")
            break
        body = "\n".join(lines[i + 1:j])
        if above == RUNNABLE:
            if lang != "sh":
                errors.append(f"README.md:{fence_line}: {RUNNABLE} above a ```{lang} block")
            blocks.append(Block("run", fence_line, body))
        elif above == OUTPUT:
            if not blocks:
                errors.append(f"README.md:{fence_line}: output block before any runnable block")
            else:
                blocks[-1].expected.append((fence_line, body))
        elif lang == "sh" and not NOT_RUN.match(above):
            errors.append(f"README.md:{fence_line}: ```sh block without {RUNNABLE} or "
                          "<!-- not run: REASON --> directly above it")
        i = j + 1
    return blocks, errors


# Fields that vary between runs and machines, replaced before lines are compared.
MASKS = [
    (re.compile(r"\d+(\.\d+)? ?s \([^)]*\)"), "# s (#)"),  # an epoch's seconds and their split
    (re.compile(r"\d+(\.\d+)? ?s\b"), "# s"),  # seconds anywhere else
    (re.compile(r"x \d+ threads?\b"), "x # threads"),
    (re.compile(r"GEMM \w+"), "GEMM #"),
    (re.compile(r"side by side \d+(\.\d+)?"), "side by side #"),  # a measured bubble
]
NUMBER = re.compile(r"(-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)")


def mask(line):
    line = line.strip()
    for pattern, replacement in MASKS:
        line = pattern.sub(replacement, line)
    return line


def same_line(expected, actual, exact):
    e, a = NUMBER.split(mask(expected)), NUMBER.split(mask(actual))
    if len(e) != len(a):
        return False
    for k, (x, y) in enumerate(zip(e, a)):
        if k % 2 == 0:
            if x != y:
                return False
        elif exact:
            if x != y:
                return False
        else:
            u, v = float(x), float(y)
            if abs(u - v) > max(0.005, 0.01 * max(abs(u), abs(v))):
                return False
    return True


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    flags = {a for a in argv[1:] if a.startswith("--")}
    if len(args) != 2 or not flags <= {"--exact", "--keep"}:
        print(__doc__, file=sys.stderr)
        return 2
    tessel, root = os.path.abspath(args[0]), os.path.abspath(args[1])
    if not os.access(tessel, os.X_OK):
        print(f"readme_test: {tessel} is not an executable", file=sys.stderr)
        return 2
    blocks, errors = parse(os.path.join(root, "README.md"))
    if errors:
        for e in errors:
            print(f"readme_test: {e}", file=sys.stderr)
        return 1
    if not blocks:
        print("readme_test: README.md has no runnable block", file=sys.stderr)
        return 1

    work = tempfile.mkdtemp(prefix="tessel-readme-")
    os.symlink(os.path.join(root, "datasets"), os.path.join(work, "datasets"))
    script = ["set -euo pipefail"]
    for n, b in enumerate(blocks, 1):
        script.append(f"echo '{MARKER.format(n)}'")
        script.append(b.text)
    env = dict(os.environ)
    env.update({
        "PATH": os.path.dirname(tessel) + os.pathsep + env.get("PATH", ""),
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "OMPI_MCA_rmaps_base_oversubscribe": "1",
        "OMPI_MCA_hwloc_base_binding_policy": "none",
        "OMPI_MCA_mpi_yield_when_idle": "1",
        "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
        "OMP_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "",
    })
    print(f"readme_test: {len(blocks)} runnable blocks in {work}", flush=True)
    start = time.monotonic()
    proc = subprocess.Popen(["bash", "-c", "\n".join(script)], cwd=work, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    outputs = {}
    current = 0
    for out_line in proc.stdout:
        m = re.fullmatch(r"@@readme-block (\d+) begins@@\n?", out_line)
        if not m:
            sys.stdout.write(out_line)
        if m:
            current = int(m.group(1))
            outputs[current] = []
            print(f"-- block {current} (README.md:{blocks[current - 1].line}), "
                  f"{time.monotonic() - start:.1f} s", flush=True)
        elif current:
            outputs[current].append(out_line.rstrip("\n"))
    rc = proc.wait()
    seconds = time.monotonic() - start

    failed = False
    if rc != 0:
        b = blocks[current - 1] if current else blocks[0]
        print(f"readme_test: block {current or 1} (README.md:{b.line}) failed with exit code "
              f"{rc}:\n{b.text}", file=sys.stderr)
        failed = True
    else:
        for n, b in enumerate(blocks, 1):
            for fence_line, body in b.expected:
                for k, want in enumerate(body.split("\n")):
                    if want.strip() in ("", "..."):
                        continue
                    if not any(same_line(want, got, "--exact" in flags) for got in outputs[n]):
                        print(f"readme_test: README.md:{fence_line + 1 + k}: block {n} "
                              f"(README.md:{b.line}) did not print\n  {want}", file=sys.stderr)
                        failed = True
    if failed or "--keep" in flags:
        print(f"readme_test: files kept in {work}", file=sys.stderr)
    else:
        subprocess.run(["rm", "-rf", work], check=False)
    print(f"readme_test: {'FAILED' if failed else 'passed'}: {len(blocks)} blocks in "
          f"{seconds:.1f} s", file=sys.stderr if failed else sys.stdout)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
