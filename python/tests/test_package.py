"""The package as a user installs it: `pip install ./python` into a fresh virtual environment."""

import os
import re
import shutil
import subprocess
import venv

import tessel
from conftest import REPO


def test_version_is_the_projects():
    cmake = (REPO / "CMakeLists.txt").read_text()
    project = re.search(r"project\(tessel VERSION ([0-9.]+)", cmake)[1]
    pyproject = (REPO / "python" / "pyproject.toml").read_text()
    assert tessel.__version__ == project
    assert re.search(r'^version = "([0-9.]+)"', pyproject, re.M)[1] == project


def test_pip_install_into_a_fresh_venv(tmp_path):
    # The system's numpy, scipy and h5py (the Debian packages) serve the venv, and pip builds the
    # package with the venv's own setuptools, offline. --no-deps: Debian's python3-h5py
    # registers itself under another distribution name, so pip would fetch h5py from PyPI.
    # From a copy: setuptools leaves build/ and an egg-info beside the sources it builds.
    source = tmp_path / "source"
    shutil.copytree(REPO / "python", source,
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    env_dir = tmp_path / "venv"
    venv.create(env_dir, system_site_packages=True, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-index",
                    "--no-build-isolation", "--no-deps", str(source)], check=True,
                   env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    probe = ("import tessel, numpy; print(tessel.__file__); "
             "tessel.write_store('g.h5', [[0], [1]], numpy.ones((2, 1)), [0, 1]); "
             "print(tessel.read_store('g.h5').indices.tolist())")
    # Run outside the checkout, without its python/ on the path: the installed copy answers.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([python, "-c", probe], cwd=tmp_path, env=env, check=True,
                         capture_output=True, text=True).stdout.splitlines()
    assert out[0].startswith(str(env_dir)) and out[1] == "[0]"
