#!/usr/bin/env python3
"""A hostile run against a built `tessel`: generates bad command lines, damaged input files of
every format Tessel reads, outputs it cannot or must not write, interrupts at random moments and
ranks killed mid-run, runs each case and classifies it.

A case is clean when the command ends as docs/robustness.md promises: for bad input, a non-zero
exit with one error line that names what was wrong (the file, or the flag) and no library noise,
nothing half-written left (no hidden temporary, no output under its final name), and no hang;
for an interrupt, exit 128 + the signal with one "interrupted by" line, and the output either
absent or complete. Anything else is a defect: a crash or a death by signal, a sanitizer report,
a hang past the timeout, no error line or several, an error line that names neither the file nor
the flag (or carries a C++ library's words), a leftover temporary or partial output, or exit 0 on
input that must be refused.

A tool, not a test: nothing in CI runs it. Usage (docs/robustness.md, "The hostile run"):

    scripts/hostile.py --tessel build/src/cli/tessel [--work DIR] [--seed N] [--only FAMILY]
                       [--max-cases N] [--timeout S] [--report out.json]

Families: flags, files, outputs, signals, ranks. It prints one line per defect and a summary:
cases, clean, defects, and the distinct defects (grouped by command, kind and message shape).
"""
import argparse
import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hostile_cases import CaseFamilies

MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1"}
# Words that must never reach the user: a C++ runtime's, a sanitizer's, HDF5's own stack.
NOISE = re.compile(r"terminate called|what\(\):|std::|basic_string|vector::|Segmentation fault|"
                   r"Aborted|core dumped|HDF5-DIAG|AddressSanitizer|LeakSanitizer|"
                   r"UndefinedBehaviorSanitizer|runtime error:|double free|munmap_chunk|"
                   r"free\(\): invalid|stack smashing|Floating point exception|Bus error")
SANITIZER = re.compile(r"AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:")
# In a sanitizer build, a size that cannot be allocated is ASan's report, not a bad_alloc Tessel
# could catch: C++'s throwing `new` ends the process there whatever the allocator options. The
# same case in a release build ends in Tessel's "out of memory" line; it is counted apart.
SANITIZER_ALLOCATION = re.compile(r"AddressSanitizer: (?:out of memory|requested allocation size|"
                                  r"allocation-size-too-big|allocator is out of memory|"
                                  r"calloc-overflow|pvalloc-overflow|invalid-allocation-alignment)|"
                                  r"hard rss limit exhausted|RSS limit")
TEMPORARY = re.compile(r"\.tmp-|\.partial|\.tmp$")
ERROR_LINE = re.compile(r"^tessel(?: \(rank \d+ of \d+, host [^)]*\))?: error|^tessel: error on rank")
INTERRUPT_LINE = re.compile(r"^tessel(?: \(rank \d+ of \d+, host [^)]*\))?: interrupted by")


class Hostile(CaseFamilies):
    def __init__(self, args):
        self.args = args
        self.tessel = str(Path(args.tessel).resolve())
        self.work = Path(args.work).resolve()
        self.rng = random.Random(args.seed)
        self.fx = self.work / "fixtures"
        self.cases_dir = self.work / "cases"
        self.results = []
        # A sanitizer build reserves terabytes of address space for its shadow memory: it runs
        # without the address-space limit, capped by ASan's own limits instead.
        self.sanitized = b"__asan_init" in Path(self.tessel).read_bytes()
        self.sanitizer_env = {}
        if self.sanitized:
            self.sanitizer_env = {
                # Open MPI's start-up allocations are never freed: no leak checks (as in CI).
                "ASAN_OPTIONS": "detect_leaks=0:allocator_may_return_null=1:"
                                "max_allocation_size_mb=6144:hard_rss_limit_mb=6144",
                "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}

    # ---- fixtures: one small instance of every input Tessel reads ----
    def sh(self, argv, **kw):
        env = dict(os.environ, **MPI_ENV)
        env.update(self.sanitizer_env)
        r = subprocess.run(argv, cwd=self.fx, env=env, capture_output=True, text=True, **kw)
        if r.returncode != 0:
            sys.exit(f"hostile: fixture command failed: {' '.join(argv)}\n{r.stdout}{r.stderr}")
        return r

    def make_fixtures(self):
        if self.fx.exists():
            shutil.rmtree(self.fx)
        self.fx.mkdir(parents=True)
        t = self.tessel
        self.sh([t, "convert", "synthetic", "--nodes", "300", "--avg-degree", "5", "--classes", "3",
                 "--feat-dim", "8", "--seed", "1", "g.h5"])
        self.sh([t, "partition", "g.h5", "--parts", "1", "--out", "p1"])
        self.sh([t, "partition", "g.h5", "--parts", "2", "--out", "p2"])
        self.sh([t, "train", "p1", "--epochs", "2", "--hidden", "4", "--quiet", "--checkpoint", "ck"])
        self.sh([t, "precompute", "p1", "--hops", "1"])
        self.sh([t, "convert", "synthetic-temporal", "--nodes", "120", "--snapshots", "6",
                 "--avg-degree", "4", "--feat-dim", "3", "--seed", "2", "t.h5"])
        self.sh([t, "partition", "t.h5", "--parts", "1", "--out", "tp1"])
        self.sh([t, "convert", "synthetic", "--nodes", "200", "--avg-degree", "4", "--classes", "3",
                 "--feat-dim", "4", "--ogb", "ogb"])
        # The temporal JSON layouts and an edge list with node features.
        (self.fx / "dyn.json").write_text(json.dumps({
            "time_periods": 6,
            "edge_mapping": {"edge_index": {str(i): [[0, 1], [1, 2], [2, 0]] for i in range(6)},
                             "edge_weight": {str(i): [1.0, 2.0, 0.5] for i in range(6)}},
            "y": [[i, i + 1, i + 2] for i in range(6)]}))
        (self.fx / "static.json").write_text(json.dumps({
            "edges": [[0, 1], [1, 2], [2, 0]], "weights": [1, 2, 3],
            "FX": [[float(i + j) for j in range(3)] for i in range(8)]}))
        (self.fx / "snap.json").write_text(json.dumps({
            str(i): {"index": i, "edges": [[0, 1], [1, 2]], "weights": [1, 1],
                     "X": [[1.0 * i, 0], [0, 1.0], [1, 1]], "y": [0.5 * i, 1.5, 2.0]}
            for i in range(5)}))
        (self.fx / "nodelink.json").write_text(json.dumps({
            "directed": False, "multigraph": False, "graph": {},
            "nodes": [{"id": n, "X": [1, 2, 3, 4, 5, 6], "y": [0, 1, 0, 1, 0, 1]} for n in "abc"],
            "links": [{"source": "a", "target": "b", "weight": 2},
                      {"source": "b", "target": "c", "weight": 1}]}))
        rows = [f"{s},{d},{tm}" for tm in range(12) for s, d in ((0, 1), (1, 2), (2, 3), (3, 0))]
        (self.fx / "edges.csv").write_text("# src,dst,time\n" + "\n".join(rows) + "\n")
        (self.fx / "nf.csv").write_text("".join(f"{i},{i * 0.5}\n" for i in range(4)))

    # ---- running and judging one case ----
    def run_case(self, case, index):
        cdir = self.cases_dir / f"{index:04d}"
        cdir.mkdir(parents=True)
        if case.setup:
            case.setup(cdir)
        argv = [a.replace("@C", str(cdir)).replace("@F", str(self.fx)) for a in case.argv]
        env = dict(os.environ, **MPI_ENV)
        env.update(self.sanitizer_env)
        env.update(case.env)

        def limits():
            os.setsid()
            if case.limit_memory and not self.sanitized:
                resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        start = time.monotonic()
        p = subprocess.Popen(argv, cwd=cdir, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, preexec_fn=limits)
        if case.signal_at:
            sig, delay = case.signal_at
            try:
                p.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                p.send_signal(sig)
        hang = False
        try:
            out, _ = p.communicate(timeout=self.args.timeout)
        except subprocess.TimeoutExpired:
            hang = True
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
        seconds = time.monotonic() - start
        text = out.decode("utf-8", "replace")
        result = {"index": index, "family": case.family, "name": case.name, "argv": argv,
                  "env": case.env, "rc": p.returncode, "seconds": round(seconds, 2),
                  "output": text[-3000:]}
        result["defects"] = self.judge(case, cdir, p.returncode, text, hang)
        if case.rerun_cleans and any(k == "leftover temporary" for k, _ in result["defects"]):
            again = {k: v for k, v in env.items() if not k.startswith("TESSEL_FAULT_")}
            r2 = subprocess.run(argv, cwd=cdir, env=again, capture_output=True, text=True,
                                timeout=self.args.timeout * 2)
            left = [str(p.relative_to(cdir)) for p in cdir.rglob("*") if TEMPORARY.search(p.name)]
            result["rerun"] = {"rc": r2.returncode, "leftovers": left,
                               "output": (r2.stdout + r2.stderr)[-1500:]}
            result["defects"] = [d for d in result["defects"] if d[0] != "leftover temporary"]
            if left or r2.returncode != 0:
                result["defects"].append(("leftover temporary after the next run",
                                          f"exit {r2.returncode}; " + ", ".join(sorted(left)[:3])))
        if [k for k, _ in result["defects"]] == ["sanitizer allocation limit"]:
            result["allocation_limit"] = result["defects"][0][1]
            result["defects"] = []
        result["clean"] = not result["defects"]
        if result["clean"] and not self.args.keep:
            shutil.rmtree(cdir, ignore_errors=True)
        return result

    def judge(self, case, cdir, rc, text, hang):
        lines = [l for l in text.splitlines() if l.strip()]
        if case.mpi:  # mpirun's own notices are not Tessel's
            kept, banner = [], False
            for l in lines:
                if l.startswith("-----"):
                    banner = not banner
                    continue
                if banner or re.match(r"^\[[^\]]+\] ", l) or l.startswith("Primary job") or \
                        l.startswith("mpirun") or "ORTE" in l:
                    continue
                kept.append(l)
            lines = kept
        defects = []
        if hang:
            return [("hang", f"no exit within {self.args.timeout} s")]
        if case.check_output and not case.signal_at:
            why = case.check_output(cdir)
            if why:
                defects.append(("output", why))
        if any(SANITIZER_ALLOCATION.search(l) for l in lines):
            # Not a memory error: see SANITIZER_ALLOCATION. Counted apart from the defects.
            return [("sanitizer allocation limit",
                     next(l for l in lines if SANITIZER_ALLOCATION.search(l)))]
        if any(SANITIZER.search(l) for l in lines):
            defects.append(("sanitizer", next(l for l in lines if SANITIZER.search(l))))
        noisy = [l for l in lines if NOISE.search(l)]
        if noisy:
            defects.append(("library words", noisy[0]))
        errors = [l for l in lines if ERROR_LINE.search(l)]
        interrupts = [l for l in lines if INTERRUPT_LINE.search(l)]
        leftovers = [str(p.relative_to(cdir)) for p in cdir.rglob("*") if TEMPORARY.search(p.name)]
        leftovers += [str(p) for p in self.fx.rglob("*") if TEMPORARY.search(p.name)]
        if leftovers:
            defects.append(("leftover temporary", ", ".join(sorted(leftovers)[:3])))
        if case.signal_at:
            sig = case.signal_at[0]
            if rc == 0:
                why = case.check_output(cdir) if case.check_output else ""
                if why:
                    defects.append(("bad output after exit 0", why))
            elif rc == 128 + sig or (case.mpi and rc != 0):
                if not case.mpi and len(interrupts) != 1:
                    defects.append(("interrupt lines", f"{len(interrupts)} 'interrupted by' lines"))
                if errors and not case.mpi:
                    defects.append(("error on interrupt", errors[0]))
                why = case.check_output(cdir) if case.check_output else ""
                if why:
                    defects.append(("bad output after interrupt", why))
            elif rc < 0:
                defects.append(("signal", f"died by signal {-rc}"))
            else:
                defects.append(("exit code", f"exit {rc} after {signal.Signals(sig).name}: "
                                f"{(errors or lines or [''])[0]}"))
            return defects
        # Under mpirun, 128 + N is mpirun saying that a rank died by signal N (a killed rank).
        if rc < 0 or (rc > 128 and not case.mpi):
            defects.append(("signal", f"died by signal {-rc if rc < 0 else rc - 128}"))
            return defects
        if rc == 0:
            if case.must_fail:
                defects.append(("exit 0 on bad input", (lines or [""])[-1][:200]))
            return defects
        # A refusal: one error line (a job: the failing rank's, and rank 0's note), naming it.
        allowed = 2 if case.mpi else 1
        if case.mpi and not errors:
            # A rank killed by SIGKILL says nothing: the survivors' "interrupted by" line (rank 0's
            # names the lost rank where its connection shows it) and mpirun's notice are the word.
            errors = interrupts
        if not errors:
            defects.append(("no error line", (lines or ["(no output)"])[-1][:200]))
        elif len(errors) > allowed:
            defects.append(("several error lines", " | ".join(e[:120] for e in errors[:3])))
        elif case.mention and not any(m.replace("@C", str(cdir)).replace("@F", str(self.fx))
                                      in errors[0] for m in case.mention):
            defects.append(("unclear message", f"names none of {case.mention}: {errors[0][:240]}"))
        for o in case.outputs:
            if (cdir / o).exists():
                defects.append(("output left", o))
        return defects

    # ---- the families ----
    def run(self):
        self.work.mkdir(parents=True, exist_ok=True)
        print(f"hostile: fixtures in {self.fx}", flush=True)
        self.make_fixtures()
        if not self.args.only or "signals" in self.args.only:
            self.sh([self.tessel, "convert", "synthetic", "--nodes", "60000", "--avg-degree", "12",
                     "--feat-dim", "16", "big.h5"])
        if self.cases_dir.exists():
            shutil.rmtree(self.cases_dir)
        all_cases = list(self.cases())
        if self.args.max_cases and len(all_cases) > self.args.max_cases:
            all_cases = random.Random(self.args.seed).sample(all_cases, self.args.max_cases)
        # Interleaved families: a run cut short still samples each.
        self.rng.shuffle(all_cases)
        print(f"hostile: {len(all_cases)} cases", flush=True)
        start = time.monotonic()
        try:
            for i, case in enumerate(all_cases):
                r = self.run_case(case, i)
                self.results.append(r)
                if not r["clean"]:
                    kinds = "; ".join(f"{k}: {w}" for k, w in r["defects"])
                    print(f"DEFECT #{i} [{case.family}] {case.name}: {kinds}", flush=True)
        except KeyboardInterrupt:
            print("hostile: interrupted; the summary covers the cases run so far", flush=True)
        self.summary(time.monotonic() - start)

    def summary(self, seconds):
        limited = [r for r in self.results if "allocation_limit" in r]
        defects = [r for r in self.results if not r["clean"]]
        distinct = {}
        for r in defects:
            for kind, what in r["defects"]:
                cmd = " ".join(a for a in r["argv"][1:3] if not a.startswith(("/", "@", "-")))
                if r["argv"][0] == "mpirun":
                    cmd = "mpirun " + r["argv"][4]
                shape = re.sub(r"/[^\s:,)']+", "PATH", what)
                shape = re.sub(r"\d+(\.\d+)?", "N", shape)[:140]
                distinct.setdefault((cmd, kind, shape), []).append(r["index"])
        by_family = {}
        for r in self.results:
            c = by_family.setdefault(r["family"], [0, 0])
            c[0] += 1
            c[1] += r["clean"]
        print(f"\nhostile: {len(self.results)} cases in {seconds:.0f} s, "
              f"{len(self.results) - len(defects)} clean, {len(defects)} with defects, "
              f"{len(distinct)} distinct defects")
        for fam, (n, clean) in by_family.items():
            print(f"  {fam:8s} {n:5d} cases, {clean:5d} clean")
        if self.sanitized:
            print(f"  sanitizer build: {len(limited)} cases ended at ASan's allocation limit "
                  f"(counted clean; a release build reports them as out of memory): "
                  f"{', '.join(str(r['index']) for r in limited[:20])}")
        for (cmd, kind, shape), idx in sorted(distinct.items()):
            print(f"  [{len(idx):3d}x] {cmd}: {kind}: {shape}  (cases {', '.join(map(str, idx[:5]))})")
        if self.args.report:
            Path(self.args.report).write_text(json.dumps(
                {"cases": len(self.results), "clean": len(self.results) - len(defects),
                 "distinct": [{"command": c, "kind": k, "shape": s, "cases": i}
                              for (c, k, s), i in distinct.items()],
                 "results": self.results}, indent=1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tessel", default=os.environ.get("TESSEL", "build/src/cli/tessel"))
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "tessel-hostile"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", help="comma-separated families: flags,files,outputs,signals,ranks")
    ap.add_argument("--max-cases", type=int, default=0, help="a random sample of this many")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds before a case is a hang")
    ap.add_argument("--signal-cases", type=int, default=42)
    ap.add_argument("--rank-cases", type=int, default=6)
    ap.add_argument("--flag-cases", type=int, default=40, help="at most this many per command")
    ap.add_argument("--keep", action="store_true", help="keep the folders of clean cases too")
    ap.add_argument("--report", help="write every case and the distinct defects here (JSON)")
    args = ap.parse_args()
    if not os.access(args.tessel, os.X_OK):
        sys.exit(f"hostile: {args.tessel} is not an executable (give --tessel or TESSEL)")
    Hostile(args).run()


if __name__ == "__main__":
    main()
