"""The case families of scripts/hostile.py: the bad command lines, damaged input files, outputs
it cannot or must not write, interrupts and killed ranks it runs against `tessel`, each a Case.
The families are methods of CaseFamilies, which scripts/hostile.py's Hostile runs and judges."""

import gzip
import json
import random
import re
import shutil
import signal
import subprocess
from pathlib import Path


class Case:
    def __init__(self, family, name, argv, *, must_fail=True, mention=(), outputs=(), env=None,
                 mpi=False, signal_at=None, check_output=None, setup=None, limit_memory=True,
                 rerun_cleans=False):
        self.family, self.name, self.argv = family, name, argv
        self.must_fail = must_fail    # bad input: exit 0 is a defect
        self.mention = list(mention)  # the error line must name one of these
        self.outputs = list(outputs)  # must not exist after a refusal
        self.env = env or {}
        self.mpi = mpi
        self.signal_at = signal_at    # (signal, seconds) for interrupt cases
        self.check_output = check_output  # callable(case_dir) -> "" or why the output is bad
        self.setup = setup            # callable(case_dir) run before the command
        self.limit_memory = limit_memory
        # A rank killed by SIGKILL cannot remove its temporaries: the same command run again
        # (without the fault) must remove them (docs/robustness.md, stale temporaries).
        self.rerun_cleans = rerun_cleans


class CaseFamilies:
    """The families; a Hostile supplies args, rng, fx, tessel and cases_dir."""

    def cases(self):
        fams = {"flags": self.flag_cases, "files": self.file_cases, "outputs": self.output_cases,
                "signals": self.signal_cases, "ranks": self.rank_cases}
        for name, make in fams.items():
            if self.args.only and name not in self.args.only.split(","):
                continue
            yield from make()

    def flag_cases(self):
        f = "@F"
        base = {
            ("convert", "synthetic"): (["convert", "synthetic", "@C/o.h5"],
                                       {"--nodes": "200", "--feat-dim": "4", "--classes": "3"}),
            ("convert", "synthetic-temporal"): (["convert", "synthetic-temporal", "@C/o.h5"],
                                                {"--nodes": "100", "--snapshots": "4"}),
            ("convert", "temporal"): (["convert", "temporal", f + "/edges.csv", "@C/o.h5"],
                                      {"--snapshots": "3"}),
            ("convert", "ogb"): (["convert", "ogb", f + "/ogb", "@C/o.h5"], {}),
            ("info",): (["info", f + "/g.h5"], {}),
            ("partition",): (["partition", f + "/g.h5", "--out", "@C/o"], {"--parts": "2"}),
            ("train",): (["train", f + "/p1", "--quiet"], {"--epochs": "1", "--hidden": "4"}),
            ("predict",): (["predict", f + "/ck/checkpoint.h5", f + "/p1"],
                           {"--predictions": "@C/o.h5"}),
            ("precompute",): (["precompute", f + "/p1", "--out", "@C/o"], {}),
            ("bench",): (["bench", f + "/p1", "--out", "@C/o", "--quiet"],
                         {"--epochs": "1", "--hidden": "4", "--modes": "full"}),
        }
        junk = ["", "abc", "nan", "inf", "1e309", "99999999999999999999", "0x10", "1,,2", "-1"]
        maybe = ["0", "1e12", "4294967297"]
        for cmd, (argv, defaults) in base.items():
            flags = self.valued_flags(list(cmd))
            pool = []
            for flag in flags:
                for v in junk + maybe:
                    rest = [x for k, d in defaults.items() if k != flag for x in (k, d)]
                    a = [self.tessel] + argv + rest + [f"{flag}={v}"]
                    # Junk must be refused (a text flag: the empty value); 0 and huge numbers
                    # may be accepted, but cleanly.
                    must = v in junk and (flag not in self.text_flags or v == "")
                    # The flag, or its value quoted as the message shows it.
                    pool.append(Case("flags", f"{' '.join(cmd)} {flag}={v!r}", a, must_fail=must,
                                     mention=[flag] + ([f'"{v}"', f"'{v}'"] if v else [])
                                     + ([f"{v} "] if len(v) >= 3 and v[-1].isdigit() else []),
                                     outputs=["o.h5", "o"]))
            rng = random.Random(f"{self.args.seed}-{cmd}")
            yield from (pool if len(pool) <= self.args.flag_cases
                        else rng.sample(pool, self.args.flag_cases))
            # Missing values, unknown flags, a missing argument.
            if flags:
                yield Case("flags", f"{' '.join(cmd)} missing value", [self.tessel] + argv + [flags[0]],
                           mention=["--", "argument"])
            yield Case("flags", f"{' '.join(cmd)} unknown flag", [self.tessel] + argv + ["--epochz", "1"],
                       mention=["--epochz"])
            yield Case("flags", f"{' '.join(cmd)} no arguments", [self.tessel] + list(cmd),
                       mention=["required", "--", "argument", "input", "DIR", "file", "out"])
        yield Case("flags", "no command", [self.tessel], mention=["command"])
        yield Case("flags", "unknown command", [self.tessel, "trian"], mention=["trian"])

    text_flags = {"--name", "--out", "--metrics", "--checkpoint", "--predictions", "--embeddings",
                  "--features", "--split", "--node-features", "--fanouts", "--balance", "--modes",
                  "--only", "--check", "--preset", "--feature-memory", "--resume"}

    def valued_flags(self, cmd):
        out = subprocess.run([self.tessel] + cmd + ["--help"], capture_output=True, text=True).stdout
        flags = []
        for line in out.splitlines():
            m = re.match(r"^\s+(?:-\w,)?(--[\w-]+)(?:,--[\w-]+)?\s+(\S+)", line)
            # Options that take a value show its type (INT, FLOAT, TEXT, ENUM, UINT); flags do not.
            if m and re.match(r"(INT|UINT|FLOAT|TEXT|ENUM)\b", m.group(2)):
                if m.group(1) not in ("--help",) and m.group(1) not in flags:
                    flags.append(m.group(1))
        return flags

    # Damaged copies of each input, each given to the commands that read it.
    def file_cases(self):
        t = self.tessel
        h5_consumers = {
            "store": ("g.h5", [["info", "@C/in"], ["partition", "@C/in", "--parts", "2", "--out", "@C/o"]]),
            "temporal store": ("t.h5", [["info", "@C/in"],
                                        ["partition", "@C/in", "--parts", "1", "--out", "@C/o"]]),
            "part file": ("p1/part-0.h5", None),
            "checkpoint": ("ck/checkpoint.h5", None),
            "sign file": (None, None),
        }
        mutations = ["empty", "half", "minus1", "flip1", "flip2", "flip3", "flip4", "zero4k",
                     "append", "json", "nouserblock", "wipeheader", "wipeheader+flip", "dir",
                     "missing"]
        for kind, (rel, consumers) in h5_consumers.items():
            if consumers is None:
                continue
            for m in mutations:
                for cons in consumers:
                    yield Case("files", f"{kind} {m} -> {cons[0]}", [t] + cons,
                               must_fail=m not in self.headerless, mention=["@C/in"], outputs=["o"],
                               setup=self.copy_mutated(rel, "in", m, binary=True))
        # Files inside a partition folder: the part, the manifest, a SIGN file, a checkpoint.
        folder_inputs = [("p1", "part-0.h5", True), ("p1", "partition.json", False)]
        sign = next((p for p in (self.fx / "p1").glob("sign-*/*.h5")), None)
        if sign:
            folder_inputs.append(("p1", str(sign.relative_to(self.fx / "p1")), True))
        for folder, rel, binary in folder_inputs:
            muts = mutations if binary else ["empty", "half", "minus1", "flip1", "flip2", "nan",
                                             "negative", "huge", "deep", "garbage", "dupkey",
                                             "dir", "missing", "wrongtype"]
            for m in muts:
                cmds = [["train", "@C/d", "--epochs", "1", "--hidden", "4", "--quiet"],
                        ["partition", "--check", "@C/d"]]
                if "sign" in rel:
                    cmds = [["train", "@C/d", "--mode", "pipeline", "--hops", "1", "--epochs", "1",
                             "--quiet"]]
                elif rel == "part-0.h5" or rel == "partition.json":
                    cmds.append(["predict", "@F/ck/checkpoint.h5", "@C/d", "--predictions", "@C/o.h5"])
                    if m in ("flip1", "half", "empty", "nan", "wrongtype"):
                        cmds.append(["precompute", "@C/d", "--out", "@C/o"])
                        cmds.append(["bench", "@C/d", "--modes", "full", "--epochs", "1", "--out",
                                     "@C/o", "--quiet"])
                for cons in cmds:
                    yield Case("files", f"{folder}/{rel} {m} -> {cons[0]}", [t] + cons,
                               # A SIGN file that is missing is computed again (documented).
                               must_fail=m not in self.headerless + (("minus1", "dupkey") if not binary else ())
                               and not ("sign" in rel and m == "missing"),
                               mention=[Path(rel).name, "@C/d"], outputs=["o", "o.h5"],
                               setup=self.copy_folder_mutated(folder, rel, m, binary))
        for m in mutations:
            for cons in (["predict", "@C/ck/checkpoint.h5", "@F/p1", "--predictions", "@C/o.h5"],
                         ["train", "@F/p1", "--resume", "@C/ck", "--epochs", "4", "--quiet",
                          "--hidden", "4"]):
                if m in ("dir", "missing") and cons[0] == "predict":
                    continue  # the positional's own check
                yield Case("files", f"checkpoint {m} -> {cons[0]}", [t] + cons,
                           must_fail=m not in self.headerless, mention=["checkpoint.h5", "ck"], outputs=["o.h5"],
                           setup=self.copy_folder_mutated("ck", "checkpoint.h5", m, True, into="ck"))
        # OGB raw files.
        text_muts = ["empty", "half", "minus1", "flip1", "flip2", "nan", "negative", "huge",
                     "garbage", "extracol", "crlf", "gzcut", "missing"]
        for rel in ("raw/edge.csv.gz", "raw/node-feat.csv.gz", "raw/node-label.csv.gz",
                    "raw/num-node-list.csv.gz", "split/random/train.csv.gz"):
            for m in text_muts:
                yield Case("files", f"ogb {rel} {m}", [t, "convert", "ogb", "@C/d", "@C/o.h5"],
                           must_fail=not (m in ("crlf", "minus1") or (m == "extracol" and "feat" in rel)
                                          or (m in ("nan", "negative") and "label" in rel)  # -1, nan: unlabeled
                                          or (m == "negative" and "feat" in rel)
                                          or (m in ("half", "empty") and "split" in rel)),
                           mention=[Path(rel).name, "@C/d"],
                           outputs=["o.h5"],
                           setup=self.copy_folder_mutated("ogb", rel, m, False, gz=True))
        # Temporal JSON layouts, the edge list and its node features.
        for rel in ("dyn.json", "static.json", "snap.json", "nodelink.json"):
            for m in ["empty", "half", "minus1", "flip1", "flip2", "flip3", "nan", "negative",
                      "huge", "deep", "garbage", "dupkey", "wrongtype", "bom", "dir", "missing"]:
                yield Case("files", f"json {rel} {m}", [t, "convert", "temporal", "@C/in", "@C/o.h5"],
                           must_fail=m not in ("bom", "dupkey", "flip1", "flip2", "flip3", "negative",
                                               "minus1"),
                           mention=["@C/in"], outputs=["o.h5"],
                           setup=self.copy_mutated(rel, "in", m, binary=False))
        for m in text_muts[:-3] + ["missing", "dir", "unsorted"]:
            yield Case("files", f"edge list {m}", [t, "convert", "temporal", "@C/in", "@C/o.h5",
                                                   "--snapshots", "3"],
                       must_fail=m not in ("crlf", "flip1", "flip2", "extracol", "negative", "minus1",
                                           "half"),
                       mention=["@C/in"], outputs=["o.h5"],
                       setup=self.copy_mutated("edges.csv", "in", m, binary=False))
            yield Case("files", f"node features {m}",
                       [t, "convert", "temporal", "@F/edges.csv", "@C/o.h5", "--snapshots", "3",
                        "--node-features", "@C/nf"],
                       must_fail=m not in ("crlf", "flip1", "flip2", "unsorted", "minus1", "negative",
                                           "extracol"),
                       mention=["@C/nf"], outputs=["o.h5"],
                       setup=self.copy_mutated("nf.csv", "nf", m, binary=False))
        # Mismatched inputs: a file of one kind where another is expected.
        for src, dst, cmd in (("t.h5", "p1/part-0.h5", "train"), ("g.h5", "ck/checkpoint.h5", "predict"),
                              ("p1/part-0.h5", "g.h5", "info"), ("ck/checkpoint.h5", "g.h5", "partition"),
                              ("p2/part-1.h5", "p1/part-0.h5", "train"), ("p2/partition.json", "p1/partition.json", "train"),
                              ("tp1/partition.json", "p1/partition.json", "train")):
            def setup(c, src=src, dst=dst):
                shutil.copytree(self.fx / "p1", c / "p1")
                shutil.copytree(self.fx / "ck", c / "ck")
                shutil.copy(self.fx / "g.h5", c / "g.h5")
                shutil.copy(self.fx / src, c / dst)
            argv = {"train": [t, "train", "@C/p1", "--epochs", "1", "--quiet", "--hidden", "4"],
                    "predict": [t, "predict", "@C/ck/checkpoint.h5", "@C/p1", "--predictions", "@C/o.h5"],
                    "info": [t, "info", "@C/g.h5"],
                    "partition": [t, "partition", "@C/g.h5", "--parts", "2", "--out", "@C/o"]}[cmd]
            yield Case("files", f"mismatch {src} as {dst} -> {cmd}", argv,
                       mention=[Path(dst).name, "@C/" + Path(dst).parent.name], outputs=["o", "o.h5"],
                       setup=setup)

    # Without Tessel's checksum header a file is one of h5py's or an older Tessel's: it opens with
    # the per-dataset checks alone (docs/robustness.md), so an intact one must be accepted, and a
    # damaged one may be (the documented gap): either way, no crash.
    headerless = ("nouserblock", "wipeheader", "wipeheader+flip")

    def copy_mutated(self, rel, name, how, binary):
        def setup(cdir):
            self.mutate(self.fx / rel, cdir / name, how, binary)
        return setup

    def copy_folder_mutated(self, folder, rel, how, binary, into="d", gz=False):
        def setup(cdir):
            shutil.copytree(self.fx / folder, cdir / into)
            target = cdir / into / rel
            self.mutate(self.fx / folder / rel, target, how, binary, gz=gz)
        return setup

    def mutate(self, src, dst, how, binary, gz=False):
        rng = random.Random(f"{self.args.seed}-{src}-{how}")
        data = src.read_bytes()
        if gz and how != "gzcut":
            data = gzip.decompress(data)
        if dst.exists() or dst.is_symlink():
            dst.unlink()
        if how == "missing":
            return
        if how == "dir":
            dst.mkdir()
            return
        if how == "empty":
            data = b""
        elif how == "half":
            data = data[: len(data) // 2]
        elif how == "minus1":
            data = data[:-1]
        elif how == "gzcut":
            data = data[: len(data) * 2 // 3]
        elif how.startswith("flip") and not how.startswith("flip+"):
            b = bytearray(data)
            for _ in range(int(how[4:] or 1) * 3):
                i = rng.randrange(len(b))
                b[i] ^= 1 << rng.randrange(8)
            data = bytes(b)
        elif how == "zero4k":
            m = len(data) // 2
            data = data[:m] + b"\0" * 4096 + data[m + 4096:]
        elif how == "append":
            data = data + bytes(rng.randrange(256) for _ in range(777))
        elif how == "json":
            data = b'{"format": "tessel-dataset"}'
        elif how == "nouserblock":
            data = data[512:]
        elif how.startswith("wipeheader"):
            b = bytearray(data)
            b[:512] = b"\0" * 512
            if how.endswith("flip"):
                for _ in range(6):
                    i = rng.randrange(512, len(b))
                    b[i] ^= 0xFF
            data = bytes(b)
        elif how in ("nan", "negative", "huge", "wrongtype"):
            text = data.decode()
            nums = list(re.finditer(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", text))
            # A manifest's timings are a record of the run, not read: leave them out.
            timing = [t.span() for t in re.finditer(r'"timings_s"\s*:\s*\{[^{}]*\}', text)]
            nums = [m for m in nums if not any(a <= m.start() < b for a, b in timing)] or nums
            # A number Tessel reads (a manifest also holds statistics it need not read).
            read = [m for m in nums if re.search(r'"(num_nodes|num_parts|feature_dim)": *$',
                                                 text[max(0, m.start() - 20):m.start()])]
            if read and how == "wrongtype":
                nums = read
            if nums:
                m = nums[rng.randrange(len(nums))] if how != "wrongtype" else nums[len(nums) // 2]
                rep = {"nan": "nan" if not str(src).endswith("json") else "NaN",
                       "negative": "-" + m.group(0), "huge": "1e400",
                       "wrongtype": '"x"'}[how]
                text = text[: m.start()] + rep + text[m.end():]
            data = text.encode()
        elif how == "deep":
            data = b"[" * 200000 + b"]" * 200000
        elif how == "garbage":
            data = bytes(rng.randrange(256) for _ in range(4096))
        elif how == "dupkey":
            text = data.decode()
            data = text.replace("{", '{"dup": 1, "dup": 2, ', 1).encode()
        elif how == "bom":
            data = b"\xef\xbb\xbf" + data
        elif how == "extracol":
            data = b"\n".join(l + b",7" if l else l for l in data.split(b"\n"))
        elif how == "crlf":
            data = data.replace(b"\n", b"\r\n")
        elif how == "unsorted":
            lines = data.splitlines()
            data = b"\n".join([lines[0]] + lines[1:][::-1]) + b"\n"
        if gz and how != "gzcut":
            data = gzip.compress(data)
        dst.write_bytes(data)

    # Outputs that cannot or must not be written.
    def output_cases(self):
        t, f = self.tessel, "@F"

        def link_to_fixture(name, target):
            def setup(c):
                (c / "victim").write_text("keep")
                (c / name).symlink_to(c / target)
            return setup

        def plain_file(c):
            (c / "afile").write_text("x")

        def sub_of_file(c):
            plain_file(c)

        long = "n" * 300
        writers = [
            ("convert", [t, "convert", "synthetic", "--nodes", "200", "--feat-dim", "4", "--classes", "3"]),
            ("partition", [t, "partition", f + "/g.h5", "--parts", "2", "--out"]),
            ("precompute", [t, "precompute", f + "/p1", "--out"]),
            ("bench", [t, "bench", f + "/p1", "--modes", "full", "--epochs", "1", "--quiet", "--out"]),
            ("train --metrics", [t, "train", f + "/p1", "--epochs", "1", "--quiet", "--metrics"]),
            ("train --checkpoint", [t, "train", f + "/p1", "--epochs", "1", "--quiet", "--checkpoint"]),
            ("train --predictions", [t, "train", f + "/p1", "--epochs", "1", "--quiet", "--predictions"]),
            ("train --embeddings", [t, "train", f + "/p1", "--epochs", "1", "--quiet", "--embeddings"]),
            ("predict", [t, "predict", f + "/ck/checkpoint.h5", f + "/p1", "--predictions"]),
        ]
        targets = [
            ("under a file", "@C/afile/sub", plain_file, True),
            ("in a missing folder tree", "@C/no/such/dir/x", None, False),
            ("is /dev/full", "/dev/full", None, True),
            ("in /proc", "/proc/hostile-x", None, True),
            ("in a read-only filesystem", "/sys/hostile-x", None, True),
            ("name too long", "@C/" + long, None, True),
            ("symlink to a file", "@C/lnk", link_to_fixture("lnk", "victim"), False),
            ("dangling symlink", "@C/dl", lambda c: (c / "dl").symlink_to(c / "nowhere"), False),
            ("an existing folder", "@C", None, False),
        ]
        for wname, argv in writers:
            for tname, path, setup, must in targets:
                def check(c, path=path):
                    v = c / "victim"
                    if v.exists() and v.read_text() != "keep":
                        return "the symlink's target was overwritten"
                    return ""
                case = Case("outputs", f"{wname} -> {tname}", argv + [path], must_fail=must,
                            mention=[path.replace("@C", "").split("/")[-1] or "/", "--", "out"],
                            setup=setup)
                case.check_output = check
                yield case
        # Outputs over the inputs they are made from (copies: nothing of the fixtures at risk).
        def copies(c):
            shutil.copytree(self.fx / "p1", c / "p1")
            shutil.copy(self.fx / "edges.csv", c / "in.csv")
        over = [
            ("train --predictions over its part file",
             [t, "train", "@C/p1", "--epochs", "1", "--quiet", "--predictions", "@C/p1/part-0.h5"]),
            ("train --metrics over its part file",
             [t, "train", "@C/p1", "--epochs", "1", "--quiet", "--metrics", "@C/p1/part-0.h5"]),
            ("bench --out over its partition", [t, "bench", "@C/p1", "--modes", "full", "--epochs",
                                                "1", "--quiet", "--force", "--out", "@C/p1"]),
            ("bench --out over the partition's parent", [t, "bench", "@C/p1", "--modes", "full",
                                                         "--epochs", "1", "--quiet", "--force",
                                                         "--out", "@C"]),
            ("convert temporal over its input", [t, "convert", "temporal", "@C/in.csv", "@C/in.csv",
                                                 "--snapshots", "3"]),
            ("precompute --out over its partition", [t, "precompute", "@C/p1", "--out", "@C/p1"]),
            ("partition --out over its input folder", [t, "partition", "@C/p1/part-0.h5", "--parts",
                                                       "1", "--force", "--out", "@C/p1"]),
        ]
        for name, argv in over:
            def intact(c):
                r = subprocess.run([self.tessel, "partition", "--check", str(c / "p1")],
                                   capture_output=True, text=True)
                return "" if r.returncode == 0 else "the input partition was damaged"
            # precompute adds its sign-P.h5 files beside the parts: allowed, the parts stay intact.
            yield Case("outputs", name, argv, mention=["@C"], setup=copies, check_output=intact,
                       must_fail=not name.startswith("precompute"))

    # Interrupts at random points of commands that run long enough to be hit.
    def signal_cases(self):
        t, f = self.tessel, "@F"
        jobs = [
            ("convert synthetic", [t, "convert", "synthetic", "--nodes", "200000", "--feat-dim", "32",
                                   "@C/o.h5"], self.valid_store("o.h5")),
            ("convert ogb", [t, "convert", "ogb", f + "/ogb", "@C/o.h5"], self.valid_store("o.h5")),
            ("convert synthetic-temporal", [t, "convert", "synthetic-temporal", "--nodes", "20000",
                                            "--snapshots", "12", "@C/o.h5"], self.valid_store("o.h5")),
            ("partition", [t, "partition", "@C/big.h5", "--parts", "4", "--out", "@C/o"],
             self.valid_partition("o")),
            ("train", [t, "train", f + "/p1", "--epochs", "300", "--quiet", "--checkpoint", "@C/ck",
                       "--checkpoint-every", "5", "--metrics", "@C/m.jsonl", "--predictions",
                       "@C/pr.h5"], self.no_partial(["ck", "pr.h5"])),
            ("bench", [t, "bench", f + "/p1", "--modes", "full,sampled", "--epochs", "60", "--quiet",
                       "--out", "@C/o"], self.valid_report("o")),
            ("precompute", [t, "precompute", f + "/p1", "--hops", "4", "--out", "@C/o"],
             self.no_partial(["o"])),
        ]
        n = max(1, self.args.signal_cases // len(jobs))
        for name, argv, check in jobs:
            for i in range(n):
                sig = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP][i % 3]
                delay = round(self.rng.uniform(0.05, 2.5), 3)
                setup = self.big_store if name == "partition" else None
                yield Case("signals", f"{name} {sig.name} at {delay} s", argv, signal_at=(sig, delay),
                           check_output=check, setup=setup)

    def big_store(self, c):
        shutil.copy(self.fx / "big.h5", c / "big.h5")

    def valid_store(self, name):
        def check(c):
            if not (c / name).exists():
                return ""
            r = subprocess.run([self.tessel, "info", str(c / name), "--no-degrees"],
                               capture_output=True, text=True)
            return "" if r.returncode == 0 else f"{name} is not a valid store: {r.stderr.strip()[:200]}"
        return check

    def valid_partition(self, name):
        def check(c):
            if not (c / name).exists():
                return ""
            r = subprocess.run([self.tessel, "partition", "--check", str(c / name)],
                               capture_output=True, text=True)
            return "" if r.returncode == 0 else f"{name} fails --check: {r.stderr.strip()[:200]}"
        return check

    def valid_report(self, name):
        def check(c):
            if not (c / name).exists():
                return ""
            try:
                json.loads((c / name / "report.json").read_text())
            except (OSError, ValueError) as e:
                return f"{name}/report.json unreadable: {e}"
            return ""
        return check

    def no_partial(self, names):
        def check(c):
            for n in names:
                p = c / n
                if p.is_dir() and any(p.iterdir()):
                    for h5 in p.glob("*.h5"):
                        r = subprocess.run(["h5ls", str(h5)], capture_output=True)
                        if r.returncode != 0:
                            return f"{h5.name} unreadable"
            return ""
        return check

    # Ranks killed mid-run under mpirun, and mpirun itself interrupted.
    def rank_cases(self):
        t, f = self.tessel, "@F"
        mpirun = ["mpirun", "-np", "2"]
        train = [t, "train", f + "/p2", "--epochs", "40", "--quiet", "--hidden", "4",
                 "--checkpoint", "@C/ck", "--checkpoint-every", "3", "--predictions", "@C/pr.h5"]
        for i in range(self.args.rank_cases):
            epoch = self.rng.randint(1, 30)
            rank = self.rng.randint(0, 1)
            kind = ["kill", None][i % 2]
            env = {"TESSEL_FAULT_RANK": str(rank), "TESSEL_FAULT_EPOCH": str(epoch)}
            if kind:
                env["TESSEL_FAULT_KIND"] = kind
            yield Case("ranks", f"train np2 rank {rank} {kind or 'error'} at epoch {epoch}",
                       mpirun + train, env=env, mpi=True, mention=["rank", "injected", "lost"],
                       limit_memory=False, check_output=self.no_partial(["ck"]),
                       rerun_cleans=kind == "kill")
            bench = [t, "bench", f + "/p2", "--modes", "full,sampled", "--epochs", "3", "--quiet",
                     "--hidden", "4", "--out", "@C/o"]
            env_b = dict(env, TESSEL_FAULT_EPOCH=str(self.rng.randint(1, 3)),
                         TESSEL_FAULT_MODE=["full", "sampled"][i % 2])
            yield Case("ranks", f"bench np2 rank {rank} {kind or 'error'} in "
                                f"{env_b['TESSEL_FAULT_MODE']} at epoch {env_b['TESSEL_FAULT_EPOCH']}",
                       mpirun + bench, env=env_b, mpi=True, mention=["rank", "injected", "lost"],
                       limit_memory=False, outputs=["o"] if env_b["TESSEL_FAULT_MODE"] == "full" else [],
                       rerun_cleans=kind == "kill")
        for i in range(self.args.rank_cases // 2):
            sig = [signal.SIGINT, signal.SIGTERM][i % 2]
            delay = round(self.rng.uniform(0.5, 3.0), 3)
            yield Case("ranks", f"mpirun train {sig.name} at {delay} s", mpirun + train, mpi=True,
                       signal_at=(sig, delay), limit_memory=False,
                       check_output=self.no_partial(["ck"]))
