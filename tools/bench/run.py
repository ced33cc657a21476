#!/usr/bin/env python3
"""flightrec benchmarks (not tests).

Runs the source documents' workloads bare, under `flightrec run --policy
observe` (recording only), under `flightrec run` with the default agent policy
(recording + sandbox), under `strace -f` (the ptrace approach of the
sandboxes we replace) and under a bpftrace script that writes a line per
syscall (tools/bench/bpftrace_peer.py: a plain eBPF tracer, without
flightrec's record), alternating runner by runner in one run, and prints
medians and ratios to bare. Also the time from `flightrec run` to the
command's exec. Each
workload times itself from inside the process, so a runner's start-up is not
counted there; the start-up is measured on its own. Also measures the
collector's ingest rate. Writes the tables to docs/BENCHMARKS.md.

usage: tools/bench/run.py [--build build] [--reps 5] [--out docs/BENCHMARKS.md]
Needs root, a built tree (tests too: the Go TLS client), strace, bpftrace,
curl, wget and NSS's tools (apt-get install strace bpftrace curl wget
libnss3-tools).
"""
import argparse
import datetime
import http.server
import json
import os
import platform
import re
import shutil
import socketserver
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time

PY = "/usr/bin/python3"
BPFTRACE_PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bpftrace_peer.py")


def exec_delay_ms(flightrec, db, t0_ns):
    """ms from t0 (just before flightrec started) to the command's exec, from the record."""
    out = subprocess.run([flightrec, "query", "--db", db, "--json", "--type", "exec"],
                         capture_output=True, text=True).stdout.splitlines()
    return (json.loads(out[0])["ts_real_ns"] - t0_ns) / 1e6 if out else float("nan")


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


class Runners:
    def __init__(self, flightrec, tmp):
        self.flightrec = flightrec
        self.tmp = tmp
        self.n = 0
        self.allow = []   # agent: --allow for the benchmark's own servers
        self.last_db = None

    def wrap(self, runner, cmd):
        if runner == "bare":
            return cmd
        if runner == "strace":
            return ["strace", "-f", "-qq", "-o", "/dev/null"] + cmd
        self.n += 1
        if runner == "bpftrace":
            return [PY, BPFTRACE_PEER, os.path.join(self.tmp, f"bench-{self.n}.bpftrace.log"), "--"] + cmd
        db = os.path.join(self.tmp, f"bench-{self.n}.db")
        self.last_db = db
        if runner == "agent":
            extra = [a for port in self.allow for a in ("--allow", f"127.0.0.1:{port}")]
        else:
            extra = ["--policy", "observe"] + (["--tls", "off"] if runner == "flightrec --tls off" else [])
        return [self.flightrec, "run", "--db", db] + extra + ["--"] + cmd

    def cleanup(self):
        for f in os.listdir(self.tmp):
            if f.startswith("bench-"):
                os.unlink(os.path.join(self.tmp, f))


def last_float(out):
    return float(out.strip().splitlines()[-1])


def timed_runs(n, cmd):
    """A command that runs cmd n times and prints each run's seconds."""
    return [PY, "-c", "import subprocess, sys, time\n"
            f"for _ in range({n}):\n"
            "    t = time.perf_counter()\n"
            f"    subprocess.run({cmd!r}, check=True)\n"
            "    print(time.perf_counter() - t)"]


def median_of_lines(out):
    return statistics.median(float(x) * 1e3 for x in out.split())


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def start_http_server(directory):
    with open(os.path.join(directory, "index.html"), "w") as f:
        f.write("<html><body>" + "x" * 1024 + "</body></html>\n")
    handler = lambda *a, **kw: QuietHandler(*a, directory=directory, **kw)
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def rss_kb(pid):
    """(total RSS, RSS of BPF map mappings) in KiB. The ring buffer is kernel
    memory mapped into the collector (its data pages twice, for wrap-around),
    so it shows in RSS although --ring-size, not the collector, sets it."""
    total = bpf = 0
    name = ""
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                    parts = line.split()
                    name = parts[5] if len(parts) > 5 else ""
                elif line.startswith("Rss:"):
                    kb = int(line.split()[1])
                    total += kb
                    if name == "anon_inode:bpf-map":
                        bpf += kb
    except OSError:
        pass
    return total, bpf


def find_child(pid, comm):
    """A descendant of pid whose comm is `comm` (the agent under a runner)."""
    out = sh(["ps", "-e", "-o", "pid=,ppid=,comm="]).stdout.split("\n")
    children = {}
    for line in out:
        parts = line.split(None, 2)
        if len(parts) == 3:
            children.setdefault(int(parts[1]), []).append((int(parts[0]), parts[2]))
    todo = [pid]
    while todo:
        p = todo.pop()
        for c, name in children.get(p, []):
            if name == comm:
                return c
            todo.append(c)
    return None


def idle_rss(runners, runner):
    """RSS of an idle python3 agent and of the runner process watching it."""
    cmd = runners.wrap(runner, [PY, "-c", "import time; time.sleep(2.5)"])
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    agent = proc.pid if runner == "bare" else find_child(proc.pid, "python3")
    agent_kb = rss_kb(agent)[0] if agent else 0
    runner_kb = (0, 0) if runner == "bare" else rss_kb(proc.pid)
    proc.wait()
    return agent_kb, runner_kb


def start_https_server(directory):
    """A local HTTPS server (self-signed) serving `directory`; returns (proc, port)."""
    cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    sh(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
        "-days", "1", "-subj", "/CN=localhost"])
    port_file = os.path.join(directory, "port")
    server = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tests/programs/https_server.py")
    proc = subprocess.Popen([PY, server, directory, cert, key, port_file])
    for _ in range(100):
        if os.path.exists(port_file):
            break
        time.sleep(0.05)
    with open(port_file) as f:
        return proc, int(f.read())


def tls_benchmarks(runners, reps, go_client):
    """HTTPS GET latency and a 100 MiB download: bare, captured, capture off;
    curl (OpenSSL), wget (GnuTLS), tstclnt (NSS) and a Go client (Go's
    crypto/tls, tests/programs/go_tls_client.go). wget, tstclnt and the Go
    client print no timing, so a python loop times each run, start-up
    included."""
    www = tempfile.mkdtemp(prefix="flightrec-https-")
    token = os.path.join(www, "token")
    with open(token, "w") as f:
        f.write("t")
    request = os.path.join(www, "request")
    with open(request, "w") as f:
        f.write("GET /big HTTP/1.0\r\nHost: localhost\r\n\r\n")
    nssdb = os.path.join(www, "nssdb")
    os.mkdir(nssdb)
    sh(["certutil", "-N", "-d", f"sql:{nssdb}", "--empty-password"])
    with open(os.path.join(www, "x"), "w") as f:
        f.write("x" * 1024)
    with open(os.path.join(www, "big"), "wb") as f:
        f.write(os.urandom(100 << 20))
    proc, port = start_https_server(www)
    base = f"https://127.0.0.1:{port}"
    wget = ["wget", "-q", "--no-check-certificate", "-O", "/dev/null"]
    workloads = [
        ("HTTPS GET, 1 KiB (median of 30)", "ms",
         ["sh", "-c", f"for i in $(seq 30); do curl -sk -o /dev/null -w '%{{time_total}}\n' {base}/x; done"],
         median_of_lines),
        ("100 MiB HTTPS download", "ms",
         ["curl", "-sk", "-o", "/dev/null", "-w", "%{time_total}\n", f"{base}/big"], median_of_lines),
        ("wget (GnuTLS): run with a 1 KiB HTTPS GET (median of 30)", "ms", timed_runs(30, wget + [f"{base}/x"]),
         median_of_lines),
        ("wget (GnuTLS): 100 MiB HTTPS download", "ms", timed_runs(1, wget + [f"{base}/big"]), median_of_lines),
        ("tstclnt (NSS): 100 MiB HTTPS download", "ms",
         timed_runs(1, ["sh", "-c", f"tstclnt -h 127.0.0.1 -p {port} -d sql:{nssdb} -o < {request} >/dev/null 2>&1"]),
         median_of_lines),
        ("Go crypto/tls (net/http): 100 MiB HTTPS download", "ms",
         timed_runs(1, ["sh", "-c", f"{go_client} http {base}/big {token} >/dev/null"]), median_of_lines),
    ]
    names = ["bare", "flightrec", "flightrec --tls off"]
    results = {w[0]: {r: [] for r in names} for w in workloads}
    for rep in range(reps):
        print(f"tls round {rep + 1}/{reps}", flush=True)
        for name, unit, cmd, parse in workloads:
            for runner in names:
                p = sh(runners.wrap(runner, cmd))
                if p.returncode != 0:
                    sys.exit(f"run.py: {name} under {runner} failed: {p.stderr.strip()[:300]}")
                results[name][runner].append(parse(p.stdout))
            runners.cleanup()
    proc.kill()
    shutil.rmtree(www, ignore_errors=True)
    lines = ["| workload | unit | bare | flightrec (TLS captured) | flightrec --tls off | captured vs bare | off vs bare |",
             "|---|---|---|---|---|---|---|"]
    for name, unit, _, _ in workloads:
        med = {r: statistics.median(results[name][r]) for r in names}
        lines.append(f"| {name} | {unit} | {med['bare']:.2f} | {med['flightrec']:.2f} | "
                     f"{med['flightrec --tls off']:.2f} | {(med['flightrec'] / med['bare'] - 1) * 100:+.1f}% | "
                     f"{(med['flightrec --tls off'] / med['bare'] - 1) * 100:+.1f}% |")
    return "\n".join(lines)


def ingest_rate(flightrec, bench_syscalls, tmp, seconds=10):
    """Highest paced getppid() rate the whole pipeline records with zero drops,
    backpressure off (--on-loss continue), so a freeze cannot hide a loss.
    Returns (rate, entries, db of that run) or None."""
    best = None
    for rate in range(100_000, 1_500_001, 100_000):
        db = os.path.join(tmp, f"ingest-{rate}.db")
        sh([flightrec, "run", "--policy", "observe", "--on-loss", "continue", "--ring-size", "16M", "--db", db, "--",
            bench_syscalls, "rate", str(rate), str(seconds)])
        end = sh([flightrec, "query", "--db", db, "--json", "--type", "session_end"]).stdout
        e = json.loads(end)
        print(f"  ingest {rate}/s for {seconds}s: {e['entries_before']} entries, {e['lost_total']} lost",
              flush=True)
        if e["lost_total"] != 0:
            break
        if best:
            os.unlink(best[2])
        best = (rate, e["entries_before"], db)
    return best


def syscall_capture_costs(flightrec, bench_syscalls, tmp, reps):
    """getppid() ns per call (200k), bare and under --policy observe --tls off
    with --entry-times on and off: once with a 256 MiB ring and --on-loss
    continue (the kernel side alone: the ring holds the burst, nothing paces
    or drops), once with run's defaults (8 MiB ring, backpressure: the
    collector's pace). Returns {(label, settings): [ns...]} and lost counts."""
    runs = {}
    lost = 0
    settings = {"kernel side (256M ring, continue)": ["--ring-size", "256M", "--on-loss", "continue"],
                "default settings": []}
    for _ in range(reps):
        p = sh([bench_syscalls, "getppid", "200000"])
        runs.setdefault(("bare", ""), []).append(last_float(p.stdout))
        for sname, sopts in settings.items():
            for entry in ("on", "off"):
                db = os.path.join(tmp, "capture-cost.db")
                p = sh([flightrec, "run", "--policy", "observe", "--tls", "off", "--entry-times", entry, "--db", db]
                       + sopts + ["--", bench_syscalls, "getppid", "200000"])
                if p.returncode != 0:
                    sys.exit(f"run.py: getppid under --entry-times {entry} failed: {p.stderr.strip()[:300]}")
                runs.setdefault((f"--entry-times {entry}", sname), []).append(last_float(p.stdout))
                end = sh([flightrec, "query", "--db", db, "--json", "--type", "session_end"]).stdout
                lost += json.loads(end.splitlines()[-1])["lost_total"]
                os.unlink(db)
    bare = statistics.median(runs[("bare", "")])
    lines = ["| getppid(), 200k calls | settings | median ns | fastest ns | vs bare (median) |", "|---|---|---|---|---|"]
    for (label, sname), v in runs.items():
        extra = "" if label == "bare" else f"+{statistics.median(v) - bare:.0f} ns"
        lines.append(f"| {label} | {sname} | {statistics.median(v):.1f} | {min(v):.1f} | {extra} |")
    lines.append("")
    lines.append(f"Events lost in all of these runs: {lost}.")
    return "\n".join(lines)


def reading_costs(flightrec, db, tmp):
    """What reading a large record costs: verify, a type query, and a JSON
    bundle export verified as an auditor would (wall time, peak RSS)."""
    def timed(cmd):
        t = time.perf_counter()
        p = sh(["/usr/bin/time", "-f", "%M"] + cmd)
        if p.returncode != 0:
            sys.exit(f"run.py: {' '.join(cmd)} failed: {p.stderr.strip()[-300:]}")
        return time.perf_counter() - t, int(p.stderr.strip().splitlines()[-1]) / 1024
    bundle = os.path.join(tmp, "big.json")
    out = {}
    out["verify --db"] = timed([flightrec, "verify", "--db", db])
    out["query --type exec"] = timed([flightrec, "query", "--db", db, "--type", "exec"])
    # The path index: /etc is named only by the storm's start-up (its
    # loader's opens); the blocks of getppid() entries name no path at all.
    out["query --path /etc"] = timed([flightrec, "query", "--db", db, "--path", "/etc"])
    # The time index: 10 ms from the middle of the storm.
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    lo, hi = con.execute("SELECT min(ts_min), max(ts_max) FROM blocks WHERE ts_min > 0").fetchone()
    con.close()
    def utc(ns):
        return datetime.datetime.fromtimestamp(ns / 1e9, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    mid = (lo + hi) // 2
    out["query --since/--until (10 ms of it)"] = timed([flightrec, "query", "--db", db, "--since", utc(mid),
                                                        "--until", utc(mid + 10_000_000)])
    out["export --session 1 (JSON)"] = timed([flightrec, "export", "--db", db, "--session", "1", "--out", bundle])
    out["verify bundle.json"] = timed([flightrec, "verify", bundle])
    os.unlink(bundle)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--out", default="docs/BENCHMARKS.md")
    ap.add_argument("--only", choices=["tls"], help="run one table and print it (the file is left alone)")
    args = ap.parse_args()
    args.out = os.path.abspath(args.out)  # the benchmarks run from a work directory

    if os.geteuid() != 0:
        sys.exit("run.py: needs root (flightrec loads BPF programs)")
    for tool, package in (("strace", "strace"), ("bpftrace", "bpftrace"), ("curl", "curl"), ("wget", "wget"), ("tstclnt", "libnss3-tools"),
                          ("certutil", "libnss3-tools")):
        if not shutil.which(tool):
            sys.exit(f"run.py: {tool} is missing: apt-get install -y {package}")
    flightrec = os.path.abspath(os.path.join(args.build, "flightrec"))
    bench_syscalls = os.path.abspath(os.path.join(args.build, "tools/bench/bench_syscalls"))
    bench_ingest = os.path.abspath(os.path.join(args.build, "tools/bench/bench_ingest"))
    go_client = os.path.abspath(os.path.join(args.build, "tests/go_tls_client"))
    for f in (flightrec, bench_syscalls, bench_ingest, go_client):
        if not os.access(f, os.X_OK):
            sys.exit(f"run.py: {f} is missing: build first (cmake --build {args.build})")

    # Everything runs from a work directory the agent policy lets the
    # sandbox read (the build tree is not), with copies of the helpers.
    tmp = tempfile.mkdtemp(prefix="flightrec-bench-")
    os.chdir(tmp)
    shutil.copy(bench_syscalls, os.path.join(tmp, "bench_syscalls"))
    bench_syscalls = os.path.join(tmp, "bench_syscalls")
    shutil.copy(go_client, os.path.join(tmp, "go_tls_client"))
    go_client = os.path.join(tmp, "go_tls_client")
    runners = Runners(flightrec, tmp)
    if args.only == "tls":
        print(tls_benchmarks(runners, max(3, args.reps // 2), go_client))
        runners.cleanup()
        return
    www = tempfile.mkdtemp(prefix="flightrec-www-")
    server = start_http_server(www)
    runners.allow = [server.server_address[1]]
    url = f"http://127.0.0.1:{server.server_address[1]}/index.html"
    out_file = os.path.join(tmp, "write.out")

    workloads = [
        ("Python loop of 1M iterations", "ms",
         [PY, "-c", "import time\nt=time.perf_counter()\ns=0\nfor i in range(1000000): s += i * i\n"
                    "print((time.perf_counter()-t)*1e3)"], last_float),
        ("HTTP GET to a localhost server (median of 60)", "ms",
         ["sh", "-c", f"for i in $(seq 60); do curl -s -o /dev/null -w '%{{time_total}}\\n' {url}; done"],
         median_of_lines),
        ("10 MB file write + fsync", "ms", [bench_syscalls, "write", "10", out_file], last_float),
        ("getppid() latency (200k calls)", "ns", [bench_syscalls, "getppid", "200000"], last_float),
        ("open()+close() of /usr/lib/os-release (100k pairs)", "ns",
         [bench_syscalls, "open", "100000", "/usr/lib/os-release"], last_float),
        ("1000 fork+exec of /bin/true", "ms", [bench_syscalls, "forkexec", "1000"], last_float),
        ("start-up + tear-down: run /bin/true", "ms", None, None),
    ]
    runner_names = ["bare", "flightrec", "agent", "strace", "bpftrace"]
    results = {w[0]: {r: [] for r in runner_names} for w in workloads}
    to_exec = {"flightrec": [], "agent": []}

    for rep in range(args.reps):
        print(f"round {rep + 1}/{args.reps}", flush=True)
        for name, unit, cmd, parse in workloads:
            # A different runner first each round: none always follows
            # the same one (a cache, a page cache, a neighbour's burst).
            for runner in runner_names[rep % len(runner_names):] + runner_names[:rep % len(runner_names)]:
                if cmd is None:  # whole-command wall time
                    wrapped = runners.wrap(runner, ["/bin/true"])
                    t0_ns = time.time_ns()
                    t = time.perf_counter()
                    p = sh(wrapped)
                    value = (time.perf_counter() - t) * 1e3
                    if runner in to_exec:
                        to_exec[runner].append(exec_delay_ms(flightrec, runners.last_db, t0_ns))
                else:
                    p = sh(runners.wrap(runner, cmd))
                    if p.returncode != 0:
                        sys.exit(f"run.py: {name} under {runner} failed: {p.stderr.strip()[:300]}")
                    value = parse(p.stdout)
                results[name][runner].append(value)
            runners.cleanup()

    # What an agent that wraps every tool call pays: runs one right after
    # another (each session's probes are removed while the next one starts).
    back_to_back = {}
    for runner in ("flightrec", "agent"):
        times = []
        for _ in range(20):
            t = time.perf_counter()
            p = sh(runners.wrap(runner, ["/bin/true"]))
            times.append((time.perf_counter() - t) * 1e3)
            if p.returncode != 0:
                sys.exit(f"run.py: back-to-back start-up under {runner} failed: {p.stderr.strip()[:300]}")
        back_to_back[runner] = times
        runners.cleanup()

    print("syscall capture: entry + return, and return alone", flush=True)
    capture_table = syscall_capture_costs(flightrec, bench_syscalls, tmp, args.reps)
    tls_table = tls_benchmarks(runners, max(3, args.reps // 2), go_client)
    rss = {r: idle_rss(runners, r) for r in ("bare", "flightrec", "strace")}
    runners.cleanup()
    print("ingest pipeline (synthetic records, one core):", flush=True)
    ingest_out = sh([bench_ingest, "1000000"]).stdout.strip()
    print(ingest_out)
    print("ingest end to end (paced getppid storm, zero drops):", flush=True)
    best = ingest_rate(flightrec, bench_syscalls, tmp)
    reading = reading_costs(flightrec, best[2], tmp) if best else {}
    for what, (secs, mb) in reading.items():
        print(f"  {what}: {secs:.2f} s, {mb:.0f} MB peak RSS", flush=True)
    server.shutdown()
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(www, ignore_errors=True)

    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        m = re.search(r"model name\s*:\s*(.*)", f.read())
        if m:
            cpu = m.group(1)
    lines = []
    lines.append("| workload | unit | bare | flightrec | flightrec + agent sandbox | strace -f | bpftrace | "
                 "flightrec vs bare | agent vs bare | strace vs bare | bpftrace vs bare |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|")

    def versus(a, b, unit):
        return f"+{a - b:.0f} ns" if unit == "ns" else f"{(a / b - 1) * 100:+.1f}%"

    def paired(runs, bare, unit):
        """The median of the rounds' own comparisons: each round runs every
        runner back to back, so its comparison cancels the VM's drift
        from one round to the next."""
        per_round = [a - b if unit == "ns" else a / b for a, b in zip(runs, bare)]
        m = statistics.median(per_round)
        return f"+{m:.0f} ns" if unit == "ns" else f"{(m - 1) * 100:+.1f}%"

    for name, unit, _, _ in workloads:
        med = {r: statistics.median(results[name][r]) for r in runner_names}
        low = {r: min(results[name][r]) for r in runner_names}
        ratio = {r: f"{paired(results[name][r], results[name]['bare'], unit)} "
                    f"(min {versus(low[r], low['bare'], unit)})"
                 for r in ("flightrec", "agent", "strace", "bpftrace")}
        lines.append(f"| {name} | {unit} | {med['bare']:.2f} | {med['flightrec']:.2f} | {med['agent']:.2f} "
                     f"| {med['strace']:.2f} | {med['bpftrace']:.2f} | {ratio['flightrec']} | {ratio['agent']} "
                     f"| {ratio['strace']} | {ratio['bpftrace']} |")
    lines.append(f"| idle python3 agent RSS | MB | {rss['bare'][0] / 1024:.1f} | {rss['flightrec'][0] / 1024:.1f} "
                 f"| | {rss['strace'][0] / 1024:.1f} | | | | | |")
    fr_total, fr_ring = rss["flightrec"][1]
    lines.append(f"| the recorder's own RSS (agent idle) | MB | - | {fr_total / 1024:.1f} "
                 f"| | {rss['strace'][1][0] / 1024:.1f} | | | | | |")
    lines.append(f"| ... of which the mapped ring buffer | MB | - | {fr_ring / 1024:.1f} | | - | | | | | |")
    lines.append(f"| ... the rest (code, heap, SQLite cache) | MB | - | {(fr_total - fr_ring) / 1024:.1f} | | - "
                 f"| | | | | |")
    table = "\n".join(lines)
    exec_table = "\n".join([
        "| from `flightrec run` to the command's exec | median | fastest |",
        "|---|---|---|",
        f"| --policy observe (recording only) | {statistics.median(to_exec['flightrec']):.1f} ms "
        f"| {min(to_exec['flightrec']):.1f} ms |",
        f"| agent (namespaces, overlay, Landlock, seccomp, limits, egress programs) "
        f"| {statistics.median(to_exec['agent']):.1f} ms | {min(to_exec['agent']):.1f} ms |"])
    b2b_table = "\n".join([
        "| `flightrec run -- /bin/true`, 20 runs back to back (TLS capture on) | median | fastest | slowest |",
        "|---|---|---|---|"] + [
        f"| {label} | {statistics.median(back_to_back[r]):.1f} ms | {min(back_to_back[r]):.1f} ms "
        f"| {max(back_to_back[r]):.1f} ms |"
        for r, label in (("flightrec", "--policy observe"), ("agent", "agent"))])
    ingest = "\n".join("    " + l for l in ingest_out.splitlines())
    e2e = (f"{best[0]:,} getppid()/s for 10 s ({best[1]:,} entries) with zero drops"
           if best else "below 100,000/s")
    reading_table = "\n".join(
        [f"Reading that record ({best[1]:,} entries) back:" if best else "", "",
         "| command | wall | peak RSS |", "|---|---|---|"] +
        [f"| `flightrec {what}` | {secs:.2f} s | {mb:.0f} MB |" for what, (secs, mb) in reading.items()])

    print()
    print(table)
    print()
    print(exec_table)
    print()
    print(b2b_table)
    print()
    print(tls_table)
    print()
    print(capture_table)
    print()
    print("end to end:", e2e)

    stamp = datetime.date.today().isoformat()
    doc = f"""# Benchmarks

Produced by `tools/bench/run.py` on {stamp}: {platform.node()}, kernel {platform.release()},
{os.cpu_count()} CPUs ({cpu}). Medians of {args.reps} rounds; in every round each workload
runs bare, under `flightrec run --policy observe` (full capture: every syscall
entry+exit joined, process events, hash chain, SQLite), under `flightrec run`
with the default agent policy (the same capture plus the sandbox: namespaces,
overlay root, Landlock, ~70 seccomp rules, cgroup limits, egress programs),
under `strace -f -o /dev/null` and under bpftrace writing a line per syscall
to a file (`tools/bench/bpftrace_peer.py`: pid, tid, comm, number and return
value of every `raw_syscalls:sys_exit` in the workload's cgroup), one after
the other. Workloads time themselves
from inside, so a runner's own start-up is only in the start-up row. Under
the agent policy the 10 MB file is written to the overlay's in-memory upper
layer, so its fsync is not a disk flush. The runners take turns at going
first, one round to the next. A "vs bare" figure is the median of the
rounds' own comparisons (each round's runs are back to back, so its
comparison cancels the VM's drift between rounds), and in brackets the
fastest runs compared (this VM has noisy neighbours; the minimum is the
cost without them). Re-run the script to refresh this file;
numbers from one machine only compare within one run.

{table}

## Start-up

Time from starting `flightrec run` to the command's exec (the exec entry's
timestamp in the record; the aim is 20 ms or less). Most of it is loading and
verifying the BPF programs, which both rows pay:

{exec_table}

Start to exit, one run right after another, as an agent that wraps each
tool call runs them (a session's TLS probes are removed in the background
while the next session starts):

{b2b_table}

## Syscall capture: entry and return, or the return alone

`run` traces each syscall's entry and return (`--entry-times on`), `watch`
its return alone (`--entry-times off`: the number and arguments are still in
the registers there). What every traced call pays, under `--policy observe
--tls off`:

{capture_table}

## TLS plaintext capture

curl (OpenSSL) and wget (GnuTLS) against a local HTTPS server (python3
ssl, self-signed), bare, under `flightrec run` with TLS capture (uprobes on
libssl and libgnutls, every call recorded in 16 KiB chunks up to 256 KiB
per call) and with `--tls off` (no probes attached; syscalls still
recorded):

{tls_table}

## Ingest

Pipeline alone (`bench_ingest`: records in the ring-buffer layout through
decode and canonical JSON on the recording thread; SHA-256 leaf + chain, the
Merkle tree, zstd blocks and SQLite on the writer thread):

{ingest}

End to end (`flightrec run --on-loss continue` of a paced getppid() storm,
16 MiB ring, raising the rate by 100k/s until the kernel reports drops;
backpressure off, so a pause cannot hide a loss): {e2e}.

{reading_table}
"""
    notes_path = os.path.join(os.path.dirname(args.out), "BENCHMARKS.notes.md")
    if os.path.exists(notes_path):
        with open(notes_path) as f:
            doc += "\n" + f.read()
    with open(args.out, "w") as f:
        f.write(doc)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
