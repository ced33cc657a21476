#!/usr/bin/env python3
"""Fleet shipping benchmarks (not tests): flightrecd's JetStream output.

- shipping rate: a getppid() storm is recorded while the NATS server is
  down (its entries wait in the spool); the server comes back and the
  rate is the spool's messages over the time to drain it. Counted again on
  the consumer side: `flightrec collect` verifies the log and must find
  every entry of the record once (0 lost, 0 duplicated).
- the shipping path's CPU: flightrecd's CPU time (all threads, from
  /proc) while it records a paced storm (--rate per second for --seconds),
  without outputs and with the JetStream output, server up; per 1M
  entries, and what shipping adds at --rate as a share of one CPU.

Medians of --rounds. Prints Markdown; --out writes it to a file.
usage: tools/bench/ship.py [--build build] [--entries 1000000] [--rate 100000] [--seconds 10] [--rounds 3] [--out F]
Needs root, a built tree, nats-server.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon import Daemon, cgroup2_root, report  # noqa: E402


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Nats:
    def __init__(self, store, port):
        self.store, self.port, self.p = store, port, None

    def start(self):
        self.p = subprocess.Popen(["nats-server", "-js", "-sd", self.store, "-a", "127.0.0.1", "-p", str(self.port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import socket
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        sys.exit("ship.py: nats-server did not start")

    def stop(self):
        if self.p:
            self.p.send_signal(signal.SIGTERM)
            self.p.wait()
            self.p = None


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status(flightrec, sock):
    out = subprocess.run([flightrec, "status", "--socket", sock, "--json"], capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 else None


def wait_drained(flightrec, sock, timeout=600):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = status(flightrec, sock)
        if st and all(o["queued"] == 0 for o in st["outputs"]):
            return time.monotonic(), st
        time.sleep(0.1)
    sys.exit("ship.py: the output did not drain")


def config(tmp, cg, port, keys, jetstream):
    path = os.path.join(tmp, "flightrecd.yaml")
    with open(path, "w") as f:
        f.write("version: 1\nstorage:\n  dir: %s/records\nsocket:\n  path: %s/control.sock\nkey: %s\nring: 64M\n"
                "watch:\n  - name: bench\n    cgroup: %s\n" % (tmp, tmp, keys, cg))
        if jetstream:
            f.write("outputs:\n  jetstream:\n    - name: fleet\n      url: nats://127.0.0.1:%d\n" % port)
    return path


def storm(cgpath, bench, args):
    return subprocess.Popen(["sh", "-c", "echo $$ > %s/cgroup.procs && exec %s %s" % (cgpath, bench, args)],
                            stdout=subprocess.DEVNULL)


def one_round(a, jetstream, server_down):
    """(daemon CPU s, shipped messages, drain seconds, entries in the record, collect report)."""
    flightrec, flightrecd = os.path.join(a.build, "flightrec"), os.path.join(a.build, "flightrecd")
    bench = os.path.join(a.build, "tools", "bench", "bench_syscalls")
    with tempfile.TemporaryDirectory() as tmp:
        keys = os.path.join(tmp, "keys")
        subprocess.run([flightrec, "keygen", "--out", keys], check=True, capture_output=True)
        name = "flightrec-ship-bench-%d" % os.getpid()
        cgpath = os.path.join(cgroup2_root(), name)
        os.mkdir(cgpath)
        port = free_port()
        nats = Nats(os.path.join(tmp, "js"), port)
        if jetstream and not server_down:
            nats.start()
        d = Daemon(flightrecd, config(tmp, name, port, keys, jetstream))
        d.await_line("running")
        sock = os.path.join(tmp, "control.sock")
        cpu0 = cpu_seconds(d.p.pid)
        work = "getppid %d" % a.entries if server_down else "rate %d %d" % (a.rate, a.seconds)
        s = storm(cgpath, bench, work)
        s.wait()
        os.rmdir(cgpath)  # its session ends with it
        d.await_line("sealed", timeout=300)
        shipped = drain = 0
        if jetstream:
            if server_down:
                before = status(flightrec, sock)["outputs"][0]
                nats.start()
                t0 = time.monotonic()
                t1, st = wait_drained(flightrec, sock)
                shipped, drain = st["outputs"][0]["sent"] - before["sent"], t1 - t0
        if not server_down:
            # The same for both runs: a second to finish, one status request,
            # then (JetStream) polls only if something is still queued.
            time.sleep(1)
            st = status(flightrec, sock)
            if jetstream and any(o["queued"] for o in st["outputs"]):
                wait_drained(flightrec, sock)
        cpu = cpu_seconds(d.p.pid) - cpu0
        d.stop()
        records = [os.path.join(r, f) for r, _, fs in os.walk(os.path.join(tmp, "records")) for f in fs if f.endswith(".db")]
        out = subprocess.run([flightrec, "query", "--db", records[0], "--type", "session_end", "--json"],
                             capture_output=True, text=True)
        entries = json.loads(out.stdout.splitlines()[-1])["seq"]
        collected = None
        if jetstream:
            host = subprocess.run(["hostname"], capture_output=True, text=True).stdout.strip()
            token = "".join(c if c.isalnum() or c in "_-" else "_" for c in host)
            with open(os.path.join(tmp, "collect.yaml"), "w") as f:
                f.write("url: nats://127.0.0.1:%d\nhosts:\n  %s: %s/flightrec.pub\n" % (port, token, keys))
            out = subprocess.run([flightrec, "collect", "--config", os.path.join(tmp, "collect.yaml"), "--out",
                                  os.path.join(tmp, "collected"), "--json", "--idle", "1s"], capture_output=True, text=True)
            collected = json.loads(out.stdout)[0]["logs"][0]
        nats.stop()
        return cpu, shipped, drain, entries, collected


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--entries", type=int, default=1000000)
    ap.add_argument("--rate", type=int, default=100000)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out")
    a = ap.parse_args()
    rates, checks = [], []
    for _ in range(a.rounds):
        _, shipped, drain, entries, c = one_round(a, True, True)
        rates.append(entries / drain)
        checks.append((entries, c["entries"], c["duplicates"], c["ok"], c["terminated"]))
        print("drain: %d entries in %d messages in %.2f s (%.0f entries/s); collected %d, duplicates %d, verified %s"
              % (entries, shipped, drain, entries / drain, c["entries"], c["duplicates"], c["ok"]), file=sys.stderr)
    cpu_off, cpu_on = [], []
    for _ in range(a.rounds):
        cpu, _, _, e0, _ = one_round(a, False, False)
        cpu_off.append(cpu / e0 * 1e6)
        cpu, _, _, e1, c = one_round(a, True, False)
        cpu_on.append(cpu / e1 * 1e6)
        print("cpu per 1M entries: %.2f s without outputs, %.2f s with JetStream" % (cpu_off[-1], cpu_on[-1]), file=sys.stderr)
    off, on = statistics.median(cpu_off), statistics.median(cpu_on)
    lost = sum(e - got for e, got, _, _, _ in checks)
    dups = sum(d for _, _, d, _, _ in checks)
    rows = [
        "| measure | median | spread | aim |",
        "|---|---|---|---|",
        "| JetStream shipping, spool drained to a local nats-server | %.0f entries/s | %.0f-%.0f | >= 200k entries/s |"
        % (statistics.median(rates), min(rates), max(rates)),
        "| ... counted by `flightrec collect`: lost, duplicated, verified | %d lost, %d duplicated, %s | | 0, 0 |"
        % (lost, dups, "all verified" if all(ok and t for _, _, _, ok, t in checks) else "NOT all verified"),
        "| flightrecd CPU per 1M entries, %dk/s storm, no outputs | %.2f s | %.2f-%.2f | |" % (a.rate // 1000, off, min(cpu_off), max(cpu_off)),
        "| ... with the JetStream output | %.2f s (%+.0f%% of the daemon's own) | %.2f-%.2f | |" % (on, (on / off - 1) * 100, min(cpu_on), max(cpu_on)),
        "| CPU the shipping path adds at %dk entries/s | %.1f%% of one CPU | | <= 10%% CPU |" % (a.rate // 1000, (on - off) * a.rate / 1e6 * 100),
    ]
    report(rows, a.out)


if __name__ == "__main__":
    main()
