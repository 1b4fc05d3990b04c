#!/usr/bin/env python3
"""Two-host runs on one machine (scripts/hosts.sh: network namespaces as hosts, TCP between them).

    hosts_test.py TESSEL_BINARY REPO_ROOT CASE        CASE: modes | layout | faults

modes   full, sampled, dynamic and pipeline training at -np 4 over two hosts (2 ranks each) give
        the losses of -np 4 on one host, bit for bit (the same ranks compute the same rows; only
        the transport differs), and the bytes sent per epoch split into inside a host and
        between hosts, summing to the one-host total; Open MPI carries the traffic between hosts
        over its tcp BTL and inside a host over shared memory (vader); the placement table names
        every rank's host.
layout  each host holding only its ranks' parts (partition.json and part-<rank>.h5 on its local
        disk) trains as the shared folder does (full and pipeline, which writes its SIGN
        features on each host); `partition --check --only` verifies a host's share; a part file
        missing on a host, one of another partition, or a partition.json that differs between
        hosts stops the job with one line naming rank, host and file.
faults  every process of one host killed, or its link taken down, mid-training: the job ends
        within 30 s, non-zero, with the lost host named by Open MPI and, with its ranks, by rank
        0's peer watch, no unfinished output left and no process left on either host; the run resumed from its
        checkpoint on the two hosts gives the losses of an uninterrupted run. Prints the seconds
        to the end of the job.

Exit code 77 (a skip, with the reason) where the machine cannot make the hosts: not root, or
network namespaces refused.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
# Open MPI's daemons watch their TCP connections with keepalive probes; its defaults (300 s idle,
# then 9 probes 20 s apart) take 8 minutes to notice a link that went down. These take 11 s.
KEEPALIVE = {
    "OMPI_MCA_oob_tcp_keepalive_time": "5",
    "OMPI_MCA_oob_tcp_keepalive_intvl": "2",
    "OMPI_MCA_oob_tcp_keepalive_probes": "3",
}
FAULT_LIMIT_S = 30.0


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


class Harness:
    """The two hosts of scripts/hosts.sh, and mpirun on one or both of them."""

    def __init__(self, tessel, root, work):
        self.tessel = tessel
        self.root = root
        self.work = work
        self.script = os.path.join(root, "scripts", "hosts.sh")
        self.dir = os.path.join(work, "hosts")
        self.env = dict(os.environ)
        self.env.update({
            "OMPI_ALLOW_RUN_AS_ROOT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
            "OMPI_MCA_mpi_yield_when_idle": "1",
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "CUDA_VISIBLE_DEVICES": "",
        })
        for name in KEEPALIVE:
            self.env.pop(name, None)

    def up(self):
        r = subprocess.run(["bash", self.script, "up", self.dir], capture_output=True, text=True)
        if r.returncode == SKIP:
            print(f"hosts_test: skipped: {r.stderr.strip()}")
            sys.exit(SKIP)
        check(r.returncode == 0, f"hosts.sh up failed ({r.returncode}): {r.stderr}")
        print(r.stdout.strip())

    def down(self):
        subprocess.run(["bash", self.script, "down", self.dir], check=False)

    def hosts(self, *args):
        r = subprocess.run(["bash", self.script, *args], capture_output=True, text=True)
        check(r.returncode == 0, f"hosts.sh {' '.join(args)} failed: {r.stderr}")
        return r.stdout

    def disk(self, host):
        """The local disk of `host`, seen from outside (inside: local())."""
        return os.path.join(self.dir, "disk", host)

    def local(self):
        return os.path.join(self.dir, "local")

    def on_host(self, host, argv):
        return ["bash", self.script, "exec", self.dir, host, *argv]

    def two_hosts(self, argv, np=4, mpirun_args=()):
        """mpirun on hosta, ranks 0-1 there and 2-3 on hostb (the hostfile's slots)."""
        return self.on_host("hosta", ["mpirun", "--hostfile", os.path.join(self.dir, "hosts.txt"),
                                      "-np", str(np), "--bind-to", "none", *mpirun_args,
                                      self.tessel, *argv])

    def one_host(self, argv, np=4):
        return ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(np), self.tessel,
                *argv]

    def run(self, cmd, expect=0, env=None, timeout=300):
        e = dict(self.env)
        e.update(env or {})
        r = subprocess.run(cmd, cwd=self.work, env=e, capture_output=True, text=True,
                           timeout=timeout)
        out = r.stdout + r.stderr
        if expect is not None:
            check(r.returncode == expect,
                  f"{' '.join(cmd)}\nexited {r.returncode}, expected {expect}:\n{out}")
        return r.returncode, out

    def start(self, cmd, env=None):
        e = dict(self.env)
        e.update(env or {})
        log = open(os.path.join(self.work, f"run-{time.monotonic_ns()}.log"), "w+")
        return subprocess.Popen(cmd, cwd=self.work, env=e, stdout=log, stderr=subprocess.STDOUT,
                                text=True), log

    def processes_on(self, host):
        """The processes still running on `host` (its network namespace)."""
        state = open(os.path.join(self.dir, "state")).read()
        ns = re.search(r"NAMESPACES=\((\S+) (\S+)\)", state).groups()
        index = 0 if host == "hosta" else 1
        r = subprocess.run(["ip", "netns", "pids", ns[index]], capture_output=True, text=True)
        return r.stdout.split()

    def prepare(self, cora=True, temporal=False):
        os.symlink(os.path.join(self.root, "datasets"), os.path.join(self.work, "datasets"))
        if cora:
            self.run([self.tessel, "convert", "ogb", "datasets/samples/cora", "cora.h5"])
            self.run([self.tessel, "partition", "cora.h5", "--parts", "4", "--out", "cora-p4"])
        if temporal:
            self.run([self.tessel, "convert", "temporal",
                      "datasets/samples/england_covid/england_covid.json", "ec.h5", "--lags", "8",
                      "--standardize"])
            self.run([self.tessel, "partition", "ec.h5", "--parts", "4", "--out", "ec-p4"])


def metrics(path):
    lines = [json.loads(line) for line in open(path)]
    return [m for m in lines if not m.get("summary")]


def losses(path):
    return [m["loss"] for m in metrics(path)]


# The flags of each mode's run: a few epochs of each, on the shipped data.
MODES = {
    "full": ["train", "cora-p4", "--mode", "full", "--model", "gcn", "--epochs", "5"],
    "sampled": ["train", "cora-p4", "--mode", "sampled", "--model", "sage", "--fanouts", "5,5",
                "--batch-size", "16", "--epochs", "2"],
    "dynamic": ["train", "ec-p4", "--mode", "dynamic", "--model", "gcn-gru", "--hidden", "16",
                "--epochs", "3"],
    "pipeline": ["train", "cora-p4", "--mode", "pipeline", "--hops", "2", "--mlp-layers", "2",
                 "--hidden", "16", "--stages", "2", "--data-parallel", "2", "--epochs", "3"],
}


def check_placement(out):
    check("placement: 4 ranks on 2 hosts" in out, f"no placement table for 2 hosts:\n{out}")
    for rank, host in ((0, "hosta"), (1, "hosta"), (2, "hostb"), (3, "hostb")):
        check(re.search(rf"^\s+{rank}\s+{host}\s", out, re.M),
              f"the placement table does not put rank {rank} on {host}:\n{out}")


def case_modes(h):
    h.prepare(temporal=True)
    for mode, flags in MODES.items():
        one, two = f"{mode}-one.jsonl", f"{mode}-two.jsonl"
        h.run(h.one_host([*flags, "--metrics", one]))
        verbose = ("--mca", "btl_base_verbose", "30") if mode == "full" else ()
        _, out = h.run(h.two_hosts([*flags, "--metrics", two], mpirun_args=verbose))
        a, b = metrics(os.path.join(h.work, one)), metrics(os.path.join(h.work, two))
        check(len(a) == len(b) and len(a) > 0,
              f"{mode}: {len(a)} epochs on one host, {len(b)} on two")
        for x, y in zip(a, b):
            # The same ranks compute the same rows on one host and on two: only the transport
            # differs, so the losses are equal bit for bit.
            check(x["loss"] == y["loss"],
                  f"{mode}: epoch {x['epoch']} loss {y['loss']!r} on two hosts, "
                  f"{x['loss']!r} on one")
            check(x["comm_bytes_between_hosts"] == 0 and
                  x["comm_bytes_inside_hosts"] == x["comm_bytes"],
                  f"{mode}: one host, yet bytes between hosts: {x}")
            check(y["comm_bytes"] == x["comm_bytes"],
                  f"{mode}: {y['comm_bytes']} bytes on two hosts, {x['comm_bytes']} on one")
            check(y["comm_bytes_inside_hosts"] + y["comm_bytes_between_hosts"] == y["comm_bytes"],
                  f"{mode}: the link kinds do not sum to comm_bytes: {y}")
            # Every mode sends over both link kinds here (the pipeline: activations between the
            # stages of a group on one host, gradients between the groups across the hosts).
            check(y["comm_bytes_between_hosts"] > 0 and y["comm_bytes_inside_hosts"] > 0,
                  f"{mode}: expected bytes over both link kinds: {y}")
        check_placement(out)
        check("between hosts" in out, f"{mode}: the epoch lines do not split the bytes:\n{out}")
        first = b[0]
        print(f"{mode}: {len(b)} epochs, losses equal on one and two hosts; epoch 1 sent "
              f"{first['comm_bytes']} bytes, {first['comm_bytes_between_hosts']} between hosts")
        if verbose:
            # Open MPI's choice of transport, from its own log: TCP to the other host, shared
            # memory inside one.
            uses = r"\[hosta:\d+\] mca: bml: Using {} btl for send to \S+ on node {}"
            check(re.search(uses.format("tcp", "hostb"), out),
                  f"no tcp BTL between the hosts:\n{out}")
            check(re.search(uses.format("vader", "hosta"), out),
                  f"no shared-memory (vader) BTL inside a host:\n{out}")
            print("transport: tcp BTL between hosta and hostb, vader (shared memory) inside each")


def place_per_host(h, folder, name):
    """Copies partition.json and the parts of each host's ranks to its local disk."""
    for host, parts in (("hosta", (0, 1)), ("hostb", (2, 3))):
        dest = os.path.join(h.disk(host), name)
        os.makedirs(dest, exist_ok=True)
        for f in ["partition.json"] + [f"part-{p}.h5" for p in parts]:
            shutil.copy2(os.path.join(h.work, folder, f), dest)


def expect_one_error(out, *words):
    errors = [line for line in out.splitlines() if line.startswith("tessel: error")]
    check(len(errors) == 1, f"expected one error line, got {len(errors)}:\n{out}")
    for w in words:
        check(w in errors[0], f"the error line does not name {w!r}: {errors[0]}")
    return errors[0]


def case_layout(h):
    h.prepare()
    local = os.path.join(h.local(), "cora-p4")
    place_per_host(h, "cora-p4", "cora-p4")
    for mode in ("full", "pipeline"):
        flags = MODES[mode]
        h.run(h.two_hosts([*flags, "--metrics", f"{mode}-shared.jsonl"]))
        h.run(h.two_hosts(["train", local, *flags[2:], "--metrics", f"{mode}-local.jsonl"]))
        a = losses(os.path.join(h.work, f"{mode}-shared.jsonl"))
        b = losses(os.path.join(h.work, f"{mode}-local.jsonl"))
        check(a == b, f"{mode}: per-host parts give losses {b}, the shared folder {a}")
        print(f"{mode}: each host holding its own parts trains as the shared folder does")
    # The pipeline wrote its SIGN features where each host's ranks read their parts.
    for host, parts in (("hosta", (0, 1)), ("hostb", (2, 3))):
        sign = os.path.join(h.disk(host), "cora-p4", "sign-gcn-k2")
        check(sorted(os.listdir(sign)) == [f"sign-{p}.h5" for p in parts],
              f"{host}'s SIGN folder holds {os.listdir(sign)}")

    # What one host holds: its share checks out; the whole-folder check says what is missing.
    _, out = h.run(h.on_host("hostb", [h.tessel, "partition", "--check", local, "--only", "2,3"]))
    check("OK: parts 2, 3 of 4" in out, f"--check --only 2,3 on hostb:\n{out}")
    _, out = h.run(h.on_host("hostb", [h.tessel, "partition", "--check", local]), expect=2)
    check("part-0.h5: no such file" in out and "--only" in out, f"--check on hostb:\n{out}")
    print("partition --check --only 2,3 verifies hostb's share")

    # A part missing on its rank's host: rank 3's file sits on hosta.
    os.rename(os.path.join(h.disk("hostb"), "cora-p4", "part-3.h5"),
              os.path.join(h.disk("hosta"), "cora-p4", "part-3.h5"))
    _, out = h.run(h.two_hosts(["train", local, "--epochs", "2"]), expect=2)
    line = expect_one_error(out, "rank 3 (host hostb)", "part-3.h5: no such file")
    check("rank 2 " not in line and "rank 0 " not in line, f"names other ranks: {line}")
    print(f"missing part: {line}")
    os.rename(os.path.join(h.disk("hosta"), "cora-p4", "part-3.h5"),
              os.path.join(h.disk("hostb"), "cora-p4", "part-3.h5"))

    # A part of another partition (same graph and part count, another method).
    h.run([h.tessel, "partition", "cora.h5", "--parts", "4", "--method", "random", "--out",
           "cora-r4"])
    shutil.copy2(os.path.join(h.work, "cora-r4", "part-2.h5"),
                 os.path.join(h.disk("hostb"), "cora-p4", "part-2.h5"))
    _, out = h.run(h.two_hosts(["train", local, "--epochs", "2"]), expect=2)
    line = expect_one_error(out, "rank 2 (host hostb)", "part-2.h5", "another partition")
    print(f"part of another partition: {line}")

    # hostb holds a whole other partition: its partition.json differs from hosta's.
    place_per_host(h, "cora-r4", "cora-p4")
    for p in (0, 1):
        shutil.copy2(os.path.join(h.work, "cora-p4", f"part-{p}.h5"),
                     os.path.join(h.disk("hosta"), "cora-p4"))
    shutil.copy2(os.path.join(h.work, "cora-p4", "partition.json"),
                 os.path.join(h.disk("hosta"), "cora-p4"))
    _, out = h.run(h.two_hosts(["train", local, "--epochs", "2"]), expect=2)
    line = expect_one_error(out, "host hostb (ranks 2, 3) differs", "partition.json")
    print(f"partition.json differing between hosts: {line}")


def leftovers(folder):
    """Hidden temporaries of unfinished outputs under `folder`."""
    found = []
    for base, dirs, files in os.walk(folder):
        for n in dirs + files:
            if ".tmp-" in n or ".partial-" in n:
                found.append(os.path.join(base, n))
    return found


def fault_run(h, kind):
    """Trains across the hosts, applies the fault mid-training, and returns what happened."""
    out_dir = os.path.join(h.work, f"out-{kind}")
    os.makedirs(out_dir)
    ckpt = os.path.join(out_dir, "ckpt")
    flags = ["train", "cora-p4", "--mode", "full", "--model", "gcn", "--epochs", "100000",
             "--eval-every", "1", "--checkpoint", ckpt, "--checkpoint-every", "4",
             "--metrics", os.path.join(out_dir, "m.jsonl"), "--predictions",
             os.path.join(out_dir, "pred.h5")]
    # The peer watch's silence limit below the keepalive's 11 s, so that rank 0 names the host
    # behind the link before mpirun ends the job.
    proc, log = h.start(h.two_hosts(flags), env={**KEEPALIVE, "TESSEL_PEER_TIMEOUT_S": "4"})
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            m = os.path.join(out_dir, "m.jsonl")
            if os.path.exists(os.path.join(ckpt, "checkpoint.h5")) and os.path.exists(m) and \
                    sum(1 for _ in open(m)) >= 10:
                break
            time.sleep(0.05)
        check(proc.poll() is None, f"{kind}: the run ended before the fault")
        # Timed from before the fault's command starts, so the figure is an upper bound.
        fault_at = time.monotonic()
        if kind == "kill":
            h.hosts("kill", h.dir, "hostb")
        else:
            h.hosts("link", h.dir, "hostb", "down")
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            raise Failure(f"{kind}: the job still runs 120 s after the fault (a hang)")
        seconds = time.monotonic() - fault_at
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.seek(0)
        out = log.read()
        log.close()
    return proc.returncode, seconds, out, out_dir, ckpt


def case_faults(h):
    h.prepare()
    for kind, what in (("kill", "every process of hostb killed"),
                       ("link", "hostb's link down")):
        rc, seconds, out, out_dir, ckpt = fault_run(h, kind)
        print(f"fault: {what} mid-training: the job ended after {seconds:.2f} s, exit code {rc}")
        check(rc != 0, f"{kind}: exit code 0 after the fault:\n{out}")
        check(seconds < FAULT_LIMIT_S, f"{kind}: {seconds:.1f} s to end the job:\n{out}")
        # Open MPI names the host it lost; rank 0's peer watch names it with its ranks (their
        # connections closed without a goodbye, or fell silent with the link).
        check(re.search(r"Remote daemon: \S+ on node hostb|Peer host:\s+hostb", out),
              f"{kind}: the lost host is not named:\n{out}")
        why = "ended without a word" if kind == "kill" else "no word from them for"
        # (mpirun may signal rank 0 between the closes of ranks 2 and 3: then it names the one
        # it saw, with its host and the host's ranks.)
        check(re.search(r"rank 0 of 4, host hosta\): .*the job lost (host hostb \(ranks 2, 3\)|"
                        r"rank [23] on host hostb \(ranks 2, 3 run there\)): [^\n]*" + why, out),
              f"{kind}: rank 0 does not name the lost host and its ranks:\n{out}")
        check_placement(out)
        check("epoch" in out, f"{kind}: no epoch ran:\n{out}")
        check(not leftovers(out_dir), f"{kind}: unfinished outputs left: {leftovers(out_dir)}")
        check(not os.path.exists(os.path.join(out_dir, "pred.h5")),
              f"{kind}: predictions written by a run that did not finish")
        # No process of the job is left on either host (the daemon on hostb ends its ranks
        # when it loses mpirun).
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (h.processes_on("hosta") or h.processes_on("hostb")):
            time.sleep(0.2)
        check(not h.processes_on("hosta") and not h.processes_on("hostb"),
              f"{kind}: processes left: hosta {h.processes_on('hosta')}, "
              f"hostb {h.processes_on('hostb')}")
        if kind == "link":
            h.hosts("link", h.dir, "hostb", "up")

        # Resumed on the two hosts, the run continues with the uninterrupted run's losses.
        total = len(metrics(os.path.join(out_dir, "m.jsonl"))) + 4
        resumed = os.path.join(out_dir, "resumed.jsonl")
        flags = ["train", "cora-p4", "--mode", "full", "--model", "gcn", "--epochs", str(total)]
        _, info = h.run(h.two_hosts([*flags, "--resume", ckpt, "--metrics", resumed]))
        match = re.search(r"resumed from \S+ after epoch (\d+)", info)
        check(match, f"{kind}: the resumed run does not say its checkpoint's epoch:\n{info}")
        epoch = int(match.group(1))
        whole = os.path.join(out_dir, "whole.jsonl")
        h.run(h.one_host([*flags, "--metrics", whole]))
        a, b = losses(whole)[epoch:], losses(resumed)
        check(len(b) == total - epoch and a == b,
              f"{kind}: resumed after epoch {epoch}, losses {b}; uninterrupted {a}")
        print(f"{kind}: resumed on two hosts after epoch {epoch}: epochs {epoch + 1}-{total} "
              "equal the uninterrupted run's")


def main(argv):
    if len(argv) != 4 or argv[3] not in ("modes", "layout", "faults"):
        print(__doc__, file=sys.stderr)
        return 2
    tessel, root, case = os.path.abspath(argv[1]), os.path.abspath(argv[2]), argv[3]
    # A timeout or Ctrl-C ends the test by a signal: the hosts come down all the same.
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, lambda n, _frame: sys.exit(128 + n))
    work = tempfile.mkdtemp(prefix=f"tessel-hosts-{case}-")
    h = Harness(tessel, root, work)
    try:
        h.up()
        {"modes": case_modes, "layout": case_layout, "faults": case_faults}[case](h)
    except Failure as e:
        print(f"hosts_test {case}: FAILED: {e}", file=sys.stderr)
        return 1
    finally:
        h.down()
        shutil.rmtree(work, ignore_errors=True)
    print(f"hosts_test {case}: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
