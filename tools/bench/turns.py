#!/usr/bin/env python3
"""What deriving the agent's turns costs the recorder (a benchmark, not a test).

A Python agent loop (tests/programs/llm_agent.py: OpenSSL, one keep-alive
HTTPS connection) does the mock API's task (a shell tool call, an edit, an
answer) REPEAT times, each request carrying a PAD-byte system prompt as real
agents do, under `flightrec run --policy observe` with --agent-turns off and
on, runners taking turns round by round. Measured: the flightrec process's
own CPU time (utime + stime of that process alone, read from /proc while it
is a zombie, so the agent's CPU is not in it), and the wall time of the
whole run. Prints medians with the spread (min-max) and the ratio on/off;
with --out, a Markdown section.

usage: tools/bench/turns.py [--build build] [--reps 5] [--repeat 40] [--pad 30000]
       [--api anthropic|openai] [--stream] [--http2] [--out FILE]
--http2: the agent and the mock speak HTTP/2 (the agent asks for the model
list on a second stream beside every call).
Needs root and a built tree.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agents import SOURCE, make_ca, start_mock  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def own_cpu_s(pid):
    """utime + stime of pid alone, once it has exited but before it is reaped."""
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def one(args, mode, port, d, work):
    db = f"{d}/{mode}.db"
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.unlink(db + suffix)
    argv = [f"{args.build}/flightrec", "run", "--policy", "observe", "--agent-turns", mode, "--db", db, "--",
            "/usr/bin/python3", f"{SOURCE}/tests/programs/llm_agent.py", "--port", str(port), "--ca", f"{d}/ca.pem",
            "--api", args.api, "--repeat", str(args.repeat), "--pad", str(args.pad)] + \
        (["--stream"] if args.stream else []) + (["--http2"] if args.http2 else [])
    start = time.monotonic()
    p = subprocess.Popen(argv, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    cpu = own_cpu_s(p.pid)
    wall = time.monotonic() - start
    err = p.stderr.read().decode(errors="replace")
    if p.wait() != 0:
        sys.exit(f"turns.py: flightrec --agent-turns {mode} failed: {err}")
    calls = subprocess.run([f"{args.build}/flightrec", "query", "--db", db, "--type", "llm_call"],
                           capture_output=True, text=True).stdout.count("\n")
    return cpu, wall, calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=f"{SOURCE}/build")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=40)
    ap.add_argument("--pad", type=int, default=30000)
    ap.add_argument("--api", default="anthropic", choices=("anthropic", "openai"))
    ap.add_argument("--stream", action="store_true")
    ap.add_argument("--http2", action="store_true")
    ap.add_argument("--out")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)  # the runs' working directory is elsewhere
    d = tempfile.mkdtemp(prefix="flightrec-bench-turns-")
    make_ca(d)
    mock, port = start_mock(d, ["--http2"] if args.http2 else [])
    work = f"{d}/work"
    os.mkdir(work)
    results = {"off": [], "on": []}
    try:
        for _ in range(args.reps):
            for mode in ("off", "on"):
                results[mode].append(one(args, mode, port, d, work))
    finally:
        mock.terminate()
    med = lambda xs: statistics.median(xs)
    lines = [f"Agent turns (tools/bench/turns.py): a Python agent, {args.repeat} tasks of 3 model calls "
             f"({args.api}{', streamed' if args.stream else ''}{', HTTP/2' if args.http2 else ''}), {args.pad}-byte system prompt per request, "
             f"{args.reps} rounds, runners alternating.", "",
             "| --agent-turns | llm_call entries | flightrec CPU, median (min-max) | wall, median (min-max) |",
             "|---|---|---|---|"]
    for mode in ("off", "on"):
        cpu = [r[0] for r in results[mode]]
        wall = [r[1] for r in results[mode]]
        lines.append(f"| {mode} | {results[mode][0][2]} | {med(cpu):.3f} s ({min(cpu):.3f}-{max(cpu):.3f}) | "
                     f"{med(wall):.3f} s ({min(wall):.3f}-{max(wall):.3f}) |")
    on, off = med([r[0] for r in results["on"]]), med([r[0] for r in results["off"]])
    lines += ["", f"Recorder CPU with turns derived: x{on / off:.3f} of without (aim: at most x1.05)."]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
