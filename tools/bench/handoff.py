#!/usr/bin/env python3
"""`flightrec run` handed to flightrecd, against loading the programs itself
(benchmarks, not tests).

For short commands, what a user feels: wall time from the start of
`flightrec run` to the command's exec (from the record's exec entry) and to
flightrec's exit, for /bin/true under the agent policy (sandbox, egress
allowlist, TLS capture on) and the observe policy (recording only), each
in-process (--daemon off) and through a running flightrecd (--daemon
require), alternating runner by runner, against bare /bin/true. Prints
medians with the fastest and slowest run, and with --out writes them as a
Markdown section.

usage: tools/bench/handoff.py [--build build] [--reps 20] [--out FILE]
Needs root and a built tree.
"""
import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time


class Daemon:
    def __init__(self, flightrecd, config):
        self.p = subprocess.Popen([flightrecd, "--config", config], stderr=subprocess.PIPE)
        self.err = b""

    def await_running(self, timeout=60):
        deadline = time.monotonic() + timeout
        while b"flightrecd: running" not in self.err:
            left = deadline - time.monotonic()
            if left <= 0 or self.p.poll() is not None:
                sys.exit("handoff.py: flightrecd did not start:\n" + self.err.decode(errors="replace"))
            r, _, _ = select.select([self.p.stderr], [], [], left)
            if r:
                self.err += os.read(self.p.stderr.fileno(), 65536)

    def stop(self):
        self.p.terminate()
        self.p.wait(timeout=120)


def exec_ms(flightrec, db, t0_real_ns):
    out = subprocess.run([flightrec, "query", "--db", db, "--json", "--type", "exec"],
                         capture_output=True, text=True).stdout.splitlines()
    return (json.loads(out[0])["ts_real_ns"] - t0_real_ns) / 1e6 if out else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out")
    args = ap.parse_args()
    flightrec = os.path.abspath(os.path.join(args.build, "flightrec"))
    flightrecd = os.path.abspath(os.path.join(args.build, "flightrecd"))
    tmp = tempfile.mkdtemp(prefix="flightrec-handoff-")
    sock = os.path.join(tmp, "control.sock")
    config = os.path.join(tmp, "flightrecd.yaml")
    with open(config, "w") as f:
        f.write("version: 1\nstorage:\n  dir: %s/records\nsocket:\n  path: %s\nring: 16M\nwatch:\n" % (tmp, sock))
    d = Daemon(flightrecd, config)
    d.await_running()
    runners = [("bare", None, None)]
    for policy in ("agent", "observe"):
        for mode in ("off", "require"):
            runners.append(("%s, %s" % (policy, "in-process" if mode == "off" else "through flightrecd"), policy, mode))
    wall = {r[0]: [] for r in runners}
    to_exec = {r[0]: [] for r in runners}
    work = os.path.join(tmp, "work")
    os.mkdir(work)
    try:
        n = 0
        for _ in range(args.reps):
            for name, policy, mode in runners:
                n += 1
                db = os.path.join(tmp, "r%d.db" % n)
                cmd = ["/bin/true"] if policy is None else [
                    flightrec, "run", "--policy", policy, "--daemon", mode, "--daemon-socket", sock, "--db", db,
                    "--", "/bin/true"]
                t0_real = time.time_ns()
                t0 = time.perf_counter()
                p = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
                wall[name].append((time.perf_counter() - t0) * 1000)
                if p.returncode != 0:
                    sys.exit("handoff.py: %s failed (%d): %s" % (name, p.returncode, p.stderr.strip()[:400]))
                if policy is not None:
                    to_exec[name].append(exec_ms(flightrec, db, t0_real))
                    os.unlink(db)
    finally:
        d.stop()
    bare = statistics.median(wall["bare"])

    def cell(xs):
        return "%.1f (%.1f-%.1f)" % (statistics.median(xs), min(xs), max(xs))

    rows = ["| `-- /bin/true`, %d runs each, alternating | start to exec, ms | start to exit, ms | exit vs bare |" % args.reps,
            "|---|---|---|---|"]
    for name, policy, _ in runners:
        ex = cell(to_exec[name]) if to_exec[name] else "-"
        rows.append("| %s | %s | %s | +%.1f ms |" % (name, ex, cell(wall[name]), statistics.median(wall[name]) - bare))
    rows.append("")
    rows.append("Medians (fastest-slowest). TLS capture on (the default) in every flightrec row; the agent policy "
                "builds its sandbox and loads its egress filter either way.")
    print("\n".join(rows))
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
