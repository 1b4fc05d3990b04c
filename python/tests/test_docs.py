"""docs/python.md's example runs as shown and prints what the page says it prints."""

import os
import re
import subprocess
import sys

from conftest import REPO


def test_the_example_of_docs_python_md(tmp_path):
    page = (REPO / "docs" / "python.md").read_text()
    code = re.search(r"<!-- runnable -->\n```python\n(.*?)```", page, re.S)[1]
    shown = re.search(r"It prints[^\n]*\n\n```text\n(.*?)```", page, re.S)[1].splitlines()
    os.symlink(REPO / "datasets", tmp_path / "datasets")
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, check=True,
                         capture_output=True, text=True).stdout.splitlines()
    assert len(out) == len(shown) == 2
    number = re.compile(r"\d+\.\d+")
    for got, expected in zip(out, shown):
        # The text as shown; accuracies within 0.01 (other CPUs and GEMM libraries round
        # differently), epochs exactly.
        assert number.sub("#", got) == number.sub("#", expected)
        for a, b in zip(number.findall(got), number.findall(expected)):
            assert abs(float(a) - float(b)) <= 0.01, (got, expected)
