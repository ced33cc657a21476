#!/usr/bin/env python3
"""flightrecd benchmarks (not tests): what a resident recorder costs.

- discovery latency: from the mkdir of a matching cgroup to the daemon's
  "recording" line (its session is open in the kernel by then);
- daemon RSS with N watched cgroups, each with a process in it;
- getppid() latency of a process outside every session while the daemon
  records N cgroups, against bare (the full-mode tax on the rest of the host),
  then while a `flightrec run` handed to the daemon is recorded too (its
  session has entry times: sys_enter is attached meanwhile), and after it.

Prints the numbers and, with --out, writes them as a Markdown section.
usage: tools/bench/daemon.py [--build build] [--cgroups 100] [--out FILE]
Needs root and a built tree.
"""
import argparse
import json
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time


def cgroup2_root():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            if " - cgroup2 " in line:
                return line.split()[4]
    sys.exit("daemon.py: no cgroup v2 mount")


class Daemon:
    def __init__(self, flightrecd, config):
        self.p = subprocess.Popen([flightrecd, "--config", config], stderr=subprocess.PIPE)
        self.lines = []
        self.partial = b""

    def await_line(self, text, count=1, timeout=30):
        # Raw reads: a buffered readline() after select() would hide a
        # second line that came in the same read until the next one.
        deadline = time.monotonic() + timeout
        while sum(text in l for l in self.lines) < count:
            left = deadline - time.monotonic()
            if left <= 0 or self.p.poll() is not None:
                sys.exit("daemon.py: flightrecd did not say %r:\n%s" % (text, "".join(self.lines)))
            r, _, _ = select.select([self.p.stderr], [], [], left)
            if r:
                chunk = os.read(self.p.stderr.fileno(), 65536)
                *done, self.partial = (self.partial + chunk).split(b"\n")
                self.lines += [l.decode(errors="replace") + "\n" for l in done]
        return time.monotonic()

    def stop(self):
        self.p.terminate()
        self.p.wait(timeout=120)


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def report(rows, out):
    """Prints the Markdown rows, and writes them to the file out when given."""
    print("\n".join(rows))
    if out:
        with open(out, "w") as f:
            f.write("\n".join(rows) + "\n")


def getppid_ns(bench, reps=5):
    out = []
    for _ in range(reps):
        p = subprocess.run([bench, "getppid", "2000000"], capture_output=True, text=True, check=True)
        out.append(float(p.stdout.strip().splitlines()[-1]))
    return statistics.median(out), min(out), max(out)


def runs_listed(flightrec, socket):
    out = subprocess.run([flightrec, "status", "--socket", socket, "--json"], capture_output=True, text=True)
    return len(json.loads(out.stdout).get("runs", [])) if out.returncode == 0 else -1


def run_costs(build, tmp, bench):
    """getppid() outside every session while a handed run is recorded, and after it ended."""
    flightrec = os.path.join(build, "flightrec")
    socket = os.path.join(tmp, "control.sock")
    run = subprocess.Popen([flightrec, "run", "--daemon", "require", "--daemon-socket", socket, "--policy", "observe",
                            "--tls", "off", "--db", os.path.join(tmp, "run.db"), "--", "sleep", "3600"],
                           stderr=subprocess.PIPE)
    try:
        for _ in range(300):
            if runs_listed(flightrec, socket) == 1:
                break
            if run.poll() is not None:
                sys.exit("daemon.py: the run ended: %s" % run.stderr.read().decode(errors="replace"))
            time.sleep(0.1)
        else:
            sys.exit("daemon.py: flightrecd never listed the run")
        during = getppid_ns(bench)
    finally:
        run.send_signal(signal.SIGTERM)
        run.wait(timeout=60)
    time.sleep(1.5)  # the daemon detaches sys_enter a second after the run, at its next tick
    return during, getppid_ns(bench)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--cgroups", type=int, default=100)
    ap.add_argument("--out")
    args = ap.parse_args()
    flightrecd = os.path.join(args.build, "flightrecd")
    bench = os.path.join(args.build, "tools/bench/bench_syscalls")
    tmp = tempfile.mkdtemp(prefix="flightrecd-bench-")
    base = os.path.join(cgroup2_root(), "flightrec-bench-%d" % os.getpid())
    os.mkdir(base)
    config = os.path.join(tmp, "flightrecd.yaml")
    with open(config, "w") as f:
        f.write("version: 1\nstorage:\n  dir: %s/records\nsocket:\n  path: %s/control.sock\nring: 16M\n"
                "watch:\n  - name: bench\n    cgroup: \"%s/*\"\n" % (tmp, tmp, os.path.basename(base)))
    sleepers, made = [], []
    bare = getppid_ns(bench)
    d = Daemon(flightrecd, config)
    try:
        d.await_line("flightrecd: running")
        latencies = []
        for i in range(args.cgroups):
            path = os.path.join(base, "c%d" % i)
            t0 = time.monotonic()
            os.mkdir(path)
            made.append(path)
            t1 = d.await_line("flightrecd: recording", i + 1)
            latencies.append((t1 - t0) * 1000)
            p = subprocess.Popen(["sleep", "3600"], preexec_fn=lambda path=path: open(path + "/cgroup.procs", "w").write(str(os.getpid())))
            sleepers.append(p)
        time.sleep(1)
        rss = rss_kb(d.p.pid)
        loaded = getppid_ns(bench)
        with_run, after_run = run_costs(args.build, tmp, bench)
    finally:
        for p in sleepers:
            p.kill()
            p.wait()
        d.stop()
        for path in made:
            for _ in range(100):
                try:
                    os.rmdir(path)
                    break
                except OSError:
                    time.sleep(0.01)
        os.rmdir(base)
    lat = sorted(latencies)
    rows = [
        "| flightrecd, %d watched cgroups | median | fastest | slowest |" % args.cgroups,
        "|---|---|---|---|",
        "| mkdir to recording (ms) | %.1f | %.1f | %.1f |" % (statistics.median(lat), lat[0], lat[-1]),
        "| getppid() outside every session, bare (ns) | %.1f | %.1f | %.1f |" % bare,
        "| ... while the daemon records them (ns) | %.1f | %.1f | %.1f |" % loaded,
        "| ... and a run handed to it besides (ns) | %.1f | %.1f | %.1f |" % with_run,
        "| ... once the run has ended (ns) | %.1f | %.1f | %.1f |" % after_run,
        "",
        "Daemon RSS with %d recorded cgroups: %.1f MB; the outside process pays +%.1f ns per syscall "
        "(median), x%.2f; +%.1f ns while a run is recorded too." % (
            args.cgroups, rss / 1024, loaded[0] - bare[0], loaded[0] / bare[0], with_run[0] - bare[0]),
    ]
    report(rows, args.out)


if __name__ == "__main__":
    main()
