#!/usr/bin/env python3
"""Lite mode's cost (not a test): flightrecd recording one cgroup in lite
mode, against bare, flightrecd in full mode, and the peers a production
host would run instead: bpftrace counting the same syscalls of the same
cgroup at their tracepoints, and auditd with a typical ruleset for the
same calls (execs, write opens, file changes, connects, identity).

Workloads, each in the watched cgroup unless said otherwise:
- getppid() latency (2M calls): a call lite has no hook for;
- getppid() latency of a process outside every watched cgroup;
- open()+close() of a file for reading (200k pairs): hooked, counted only;
- 10 MiB file write + fsync (64 KiB writes), median of 10 in a row;
- HTTP GET of a 1 KiB page from a localhost server, median of 30 curl runs.

Configurations alternate within each round, so drift hits them alike;
auditd runs last. Everything else runs under `auditctl -a never,task`
(once auditd has run on a machine, new processes stay on the kernel's
audit slow path until that rule; it is left in place at the end). Prints medians and spreads; with --out, writes the Markdown.
usage: tools/bench/lite.py [--build build] [--reps 5] [--out FILE]
Needs root, a built tree, and bpftrace, auditd and curl installed.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon import Daemon, cgroup2_root, report  # noqa: E402
from run import start_http_server  # noqa: E402

# What auditd is asked to log: lite's recorded calls, as an auditor would write them.
AUDIT_RULES = [
    ["-a", "always,exit", "-F", "arch=b64", "-S", "execve,execveat", "-k", "fr-exec"],
    ["-a", "always,exit", "-F", "arch=b64", "-S", "openat", "-F", "a2&3", "-k", "fr-write"],
    ["-a", "always,exit", "-F", "arch=b64", "-S", "open", "-F", "a1&3", "-k", "fr-write"],
    ["-a", "always,exit", "-F", "arch=b64", "-S",
     "unlink,unlinkat,rename,renameat,renameat2,chmod,fchmod,fchmodat,chown,fchown,fchownat,link,linkat,"
     "symlink,symlinkat", "-k", "fr-change"],
    ["-a", "always,exit", "-F", "arch=b64", "-S", "connect,bind,accept,accept4", "-k", "fr-net"],
    ["-a", "always,exit", "-F", "arch=b64", "-S", "setuid,setgid,setreuid,setregid,setresuid,setresgid,ptrace,"
     "mount,umount2,bpf,init_module,finit_module", "-k", "fr-priv"],
]
BPFTRACE_CALLS = ["openat", "execve", "connect", "bind", "accept4", "unlinkat", "renameat2", "fchmodat",
                  "fchownat", "setuid", "ptrace", "mount", "bpf"]


def in_cgroup(cgroup, cmd):
    """cmd run inside cgroup (moved there before its exec)."""
    return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', cgroup] + cmd


def run_value(cmd, parse):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("lite.py: %s failed: %s" % (cmd, p.stderr.strip()[:300]))
    return parse(p.stdout)


def last_float(out):
    return float(out.strip().splitlines()[-1])


def median(out):
    return statistics.median(float(x) for x in out.split())


def median_of_lines(out):  # curl: seconds
    return statistics.median(float(x) * 1000 for x in out.split())


class Config:
    """A recorder that is on between start() and stop()."""

    def __init__(self, name, start, stop):
        self.name, self.start, self.stop = name, start, stop


def daemon_config(tmp, agent_rel, mode):
    path = os.path.join(tmp, "flightrecd-%s.yaml" % mode)
    with open(path, "w") as f:
        f.write("version: 1\nstorage:\n  dir: %s/records\nsocket:\n  path: %s/control.sock\nring: 16M\n"
                "watch:\n  - name: bench\n    cgroup: \"%s\"\n    mode: %s\n" % (tmp, tmp, agent_rel, mode))
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out")
    args = ap.parse_args()
    for tool in ("bpftrace", "auditctl", "auditd", "curl"):
        if not shutil.which(tool):
            sys.exit("lite.py: %s is missing: apt-get install -y bpftrace auditd curl" % tool)
    # It replaces the audit rules and stops auditd at the end: never on a
    # host whose audit setup is in use.
    status = subprocess.run(["auditctl", "-s"], capture_output=True, text=True).stdout
    rules = subprocess.run(["auditctl", "-l"], capture_output=True, text=True).stdout.strip()
    if "enabled 1" in status or "enabled 2" in status or rules not in ("", "No rules", "-a never,task") or \
            subprocess.run(["pgrep", "-x", "auditd"], capture_output=True).returncode == 0:
        sys.exit("lite.py: audit is in use here (auditd running, audit enabled or rules loaded); "
                 "run it on a machine of its own")
    flightrecd = os.path.abspath(os.path.join(args.build, "flightrecd"))
    bench = os.path.abspath(os.path.join(args.build, "tools/bench/bench_syscalls"))
    tmp = tempfile.mkdtemp(prefix="flightrec-lite-bench-")
    www = tempfile.mkdtemp(prefix="flightrec-lite-www-")
    server = start_http_server(www)
    url = "http://127.0.0.1:%d/index.html" % server.server_address[1]
    base_rel = "flightrec-lite-bench-%d" % os.getpid()
    base = os.path.join(cgroup2_root(), base_rel)
    agent = os.path.join(base, "agent")
    os.makedirs(agent)
    readable = os.path.join(tmp, "readable")
    with open(readable, "w") as f:
        f.write("x\n")

    state = {}

    def start_daemon(mode):
        def start():
            d = Daemon(flightrecd, daemon_config(tmp, base_rel + "/agent", mode))
            d.await_line("flightrecd: recording")
            state["daemon"] = d
        return start

    def stop_daemon():
        state.pop("daemon").stop()
        shutil.rmtree(os.path.join(tmp, "records"), ignore_errors=True)

    def start_bpftrace():
        # bpftrace needs tracefs where it looks (flightrecd mounts its own, privately).
        if not os.path.exists("/sys/kernel/tracing/events"):
            subprocess.run(["mount", "-t", "tracefs", "tracefs", "/sys/kernel/tracing"], check=True)
            state["mounted_tracefs"] = True
        probes = ",".join("tracepoint:syscalls:sys_exit_%s" % c for c in BPFTRACE_CALLS)
        script = '%s /cgroup == cgroupid("%s")/ { @[probe] = count(); }' % (probes, agent)
        p = subprocess.Popen(["bpftrace", "-e", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        said = ""
        while "Attaching" not in said:  # "Attaching N probes..." (a memlock warning may come first)
            line = p.stdout.readline()
            if not line:
                sys.exit("lite.py: bpftrace did not start: " + said)
            said += line
        time.sleep(0.5)
        state["bpftrace"] = p

    def stop_bpftrace():
        p = state.pop("bpftrace")
        p.terminate()
        p.communicate(timeout=30)

    def start_auditd():
        subprocess.run(["auditctl", "-D"], capture_output=True)
        subprocess.run(["auditd"], check=True)
        for rule in AUDIT_RULES:
            subprocess.run(["auditctl"] + rule, check=True, capture_output=True)
        subprocess.run(["auditctl", "-e", "1"], check=True, capture_output=True)

    def stop_auditd():
        subprocess.run(["auditctl", "-D"], capture_output=True)
        subprocess.run(["auditctl", "-e", "0"], capture_output=True)
        subprocess.run(["pkill", "-x", "auditd"])
        time.sleep(0.5)

    configs = [
        Config("bare", lambda: None, lambda: None),
        Config("flightrecd lite", start_daemon("lite"), stop_daemon),
        Config("flightrecd full", start_daemon("full"), stop_daemon),
        Config("bpftrace (counts)", start_bpftrace, stop_bpftrace),
    ]
    workloads = [
        ("getppid() in the watched cgroup", "ns", in_cgroup(agent, [bench, "getppid", "2000000"]), last_float),
        ("getppid() outside every watched cgroup", "ns", [bench, "getppid", "2000000"], last_float),
        ("open()+close() for reading (200k pairs)", "ns", in_cgroup(agent, [bench, "open", "200000", readable]),
         last_float),
        ("10 MiB write + fsync (median of 10)", "ms",
         in_cgroup(agent, ["sh", "-c", 'for i in 1 2 3 4 5 6 7 8 9 10; do "$0" write 10 "$1"; done', bench,
                           os.path.join(tmp, "out")]), median),
        ("HTTP GET, localhost (median of 30)", "ms",
         in_cgroup(agent, ["sh", "-c", "for i in $(seq 30); do curl -s -o /dev/null -w '%%{time_total}\\n' %s; done"
                           % url]), median_of_lines),
    ]
    results = {(c.name, w[0]): [] for c in configs + [Config("auditd", None, None)] for w in workloads}
    # Audit off for every task but while auditd is measured: a machine
    # where auditd ever ran otherwise puts new processes on the audit slow
    # path (~+170 ns a syscall) even with audit disabled.
    subprocess.run(["auditctl", "-D"], capture_output=True)
    subprocess.run(["auditctl", "-a", "never,task"], capture_output=True)
    try:
        for rep in range(args.reps):
            print("round %d/%d" % (rep + 1, args.reps), flush=True)
            for c in configs:
                c.start()
                try:
                    for name, _, cmd, parse in workloads:
                        results[(c.name, name)].append(run_value(cmd, parse))
                finally:
                    c.stop()
        print("auditd", flush=True)
        start_auditd()
        try:
            for rep in range(args.reps):
                for name, _, cmd, parse in workloads:
                    results[("auditd", name)].append(run_value(cmd, parse))
        finally:
            stop_auditd()
            subprocess.run(["auditctl", "-a", "never,task"], capture_output=True)
    finally:
        if state.get("mounted_tracefs"):
            subprocess.run(["umount", "/sys/kernel/tracing"])
        server.shutdown()
        for _ in range(100):
            try:
                os.rmdir(agent)
                os.rmdir(base)
                break
            except OSError:
                time.sleep(0.05)
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(www, ignore_errors=True)

    names = [c.name for c in configs] + ["auditd"]
    rows = ["| workload (unit) | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for name, unit, _, _ in workloads:
        bare = statistics.median(results[("bare", name)])
        cells = []
        for n in names:
            v = results[(n, name)]
            med = statistics.median(v)
            rel = "" if n == "bare" else (" (+%.0f)" % (med - bare) if unit == "ns" else " (x%.3f)" % (med / bare))
            fmt = "%.1f" if unit == "ns" else "%.2f"
            cells.append((fmt + "%s [" + fmt + "-" + fmt + "]") % (med, rel, min(v), max(v)))
        rows.append("| %s (%s) | %s |" % (name, unit, " | ".join(cells)))
    rows.append("")
    rows.append("Median of %d runs each [fastest-slowest]; in brackets after the median, the difference "
                "to bare (ns) or the ratio (ms)." % args.reps)
    report(rows, args.out)


if __name__ == "__main__":
    main()
