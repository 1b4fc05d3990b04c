"""Running the `tessel` program from Python: under mpirun for several ranks, with its summary,
metrics and errors handed back as Python values."""

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from .results import _metric_lines

_ERROR_PREFIX = "tessel: error: "


class TesselError(RuntimeError):
    """A failed `tessel` run. str(e) and e.message are the program's one-line error message
    (without its `tessel: error: ` prefix); e.returncode, e.command, e.stdout and e.stderr say
    the rest."""

    def __init__(self, message, returncode=None, command=None, stdout="", stderr=""):
        super().__init__(message)
        self.message = message
        self.returncode = returncode
        self.command = command
        self.stdout = stdout
        self.stderr = stderr


def find_binary():
    """The tessel program: $TESSEL_BIN, else `tessel` on PATH, else the build folder of the
    checkout this package lies in (build/src/cli/tessel)."""
    given = os.environ.get("TESSEL_BIN")
    if given:
        if not (os.path.isfile(given) and os.access(given, os.X_OK)):
            raise TesselError(f"TESSEL_BIN={given} is not an executable file")
        return given
    on_path = shutil.which("tessel")
    if on_path:
        return on_path
    built = Path(__file__).resolve().parents[2] / "build" / "src" / "cli" / "tessel"
    if built.is_file() and os.access(built, os.X_OK):
        return str(built)
    raise TesselError("cannot find the tessel program: set TESSEL_BIN, put tessel on PATH, or "
                      "build it in the checkout (scripts/quickstart.sh)")


@dataclass
class RunResult:
    """What a run gave: `summary` (train: the metrics file's summary line; bench: report.json;
    a subcommand given --json: its JSON output; else None), `metrics` (train: the epoch records,
    a list of dicts; else []), the program's stdout and stderr, and the command line run."""
    command: list
    returncode: int
    stdout: str
    stderr: str
    summary: dict = None
    metrics: list = field(default_factory=list)


def _option(args, flag):
    """The value of `--flag V` or `--flag=V` in args, else None."""
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a[len(flag) + 1:]
    return None


def _error_message(stderr, returncode):
    lines = [l.strip() for l in stderr.splitlines()]
    for line in lines:
        if line.startswith(_ERROR_PREFIX):
            return line[len(_ERROR_PREFIX):]
    # No line of Tessel's own: mpirun's (a rank count it cannot place, a missing host) or a
    # crash. The first paragraph says most (mpirun wraps it over lines); the framing rows of
    # dashes say nothing.
    paragraph = []
    for line in lines:
        if line and set(line) != {"-"}:
            paragraph.append(line)
        elif paragraph:
            break
    if paragraph:
        return " ".join(paragraph)
    return f"tessel exited with status {returncode} and printed no error"


def _pump(stream, sink, keep):
    for line in stream:
        keep.append(line)
        if sink is not None:
            sink.write(line)
            sink.flush()


def run(args, np=1, hostfile=None, *, echo=False, env=None, cwd=None, timeout=None,
        mpirun="mpirun", mpirun_args=()):
    """Runs `tessel ARGS` and returns a RunResult; raises TesselError when it fails.

    args: the subcommand and its arguments, as a list (or one string, split like a shell).
    np: the number of ranks. With np > 1 or a hostfile the program runs under
        `mpirun -np NP [--hostfile HOSTFILE] MPIRUN_ARGS... tessel ARGS` (Open MPI's flags; as
        root, Open MPI wants OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 in the
        environment, and mpirun_args=["--oversubscribe"] runs more ranks than cores).
    echo: copy the program's output to this process's stdout and stderr as it comes.
    env: variables added to the environment of the run.

    timeout: seconds; past them the run is stopped and subprocess.TimeoutExpired raised.

    `tessel train` is given `--metrics` (a temporary file) unless args name one, so the result
    always holds the summary and the epoch records. The program is found by find_binary().
    """
    args = shlex.split(args) if isinstance(args, str) else [os.fspath(a) for a in args]
    if not args:
        raise ValueError("run: no subcommand given")
    binary = find_binary()
    command = [binary] + args
    if np > 1 or hostfile is not None:
        launcher = shutil.which(mpirun)
        if launcher is None:
            raise TesselError(f"cannot run {np} ranks: {mpirun} is not on PATH (Open MPI's "
                              "mpirun; Debian package openmpi-bin)")
        hosts = ["--hostfile", os.fspath(hostfile)] if hostfile is not None else []
        command = [launcher, "-np", str(int(np))] + hosts + list(mpirun_args) + command
    full_env = dict(os.environ)
    full_env.update(env or {})
    with tempfile.TemporaryDirectory(prefix="tessel-run-") as scratch:
        metrics_path = None
        if args[0] == "train":
            metrics_path = _option(args, "--metrics")
            if metrics_path is None:
                metrics_path = os.path.join(scratch, "metrics.jsonl")
                command += ["--metrics", metrics_path]
            elif cwd is not None:
                metrics_path = os.path.join(cwd, metrics_path)
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=full_env, cwd=cwd)
        out, err = [], []
        pumps = [threading.Thread(target=_pump, args=(proc.stdout, sys.stdout if echo else None,
                                                      out)),
                 threading.Thread(target=_pump, args=(proc.stderr, sys.stderr if echo else None,
                                                      err))]
        for p in pumps:
            p.start()
        try:
            returncode = proc.wait(timeout=timeout)
        except BaseException:
            # A timeout or Ctrl-C: mpirun passes SIGTERM on to its ranks.
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            for p in pumps:
                p.join()
            raise
        for p in pumps:
            p.join()
        stdout, stderr = "".join(out), "".join(err)
        if returncode != 0:
            raise TesselError(_error_message(stderr, returncode), returncode, command, stdout,
                              stderr)
        result = RunResult(command=command, returncode=returncode, stdout=stdout, stderr=stderr)
        if metrics_path is not None and os.path.exists(metrics_path):
            result.metrics, result.summary = _metric_lines(metrics_path)
        elif args[0] == "bench" and _option(args, "--out") is not None:
            report = Path(cwd or ".") / _option(args, "--out") / "report.json"
            if report.is_file():
                result.summary = json.loads(report.read_text(encoding="utf-8"))
        elif "--json" in args:
            try:
                result.summary = json.loads(stdout)
            except json.JSONDecodeError:
                result.summary = None
    return result
