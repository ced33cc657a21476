#!/usr/bin/env python3
"""Two builds of flightrec compared on what every recorded call pays (not a test).

Alternates build A and build B (and a bare run), round by round, each
recording `bench_syscalls getppid N` under `flightrec run --policy observe
--tls off` with a 256 MiB ring and --on-loss continue (the kernel side
alone: nothing paces or drops), once with --entry-times on and once off.
Prints, per build and setting, the median and range of ns per call and the
median added to the bare call. Use it when a change touches the syscall
programs' hot path: build the commit before it in another tree, and give
both binaries.

usage: tools/bench/ab.py A_FLIGHTREC B_FLIGHTREC BENCH_SYSCALLS [--rounds 7] [--calls 200000]
Needs root.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile


def ns_per_call(argv):
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"ab.py: {' '.join(argv[:3])} failed: {p.stderr.strip()[:300]}")
    return float(p.stdout.split()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("bench_syscalls")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=200_000)
    args = ap.parse_args()
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "ab.db")
        for r in range(args.rounds):
            order = [("A", args.a), ("B", args.b)]
            if r % 2:
                order.reverse()  # each goes first every other round
            runs.setdefault(("bare", ""), []).append(ns_per_call([args.bench_syscalls, "getppid", str(args.calls)]))
            for name, binary in order:
                for entry in ("on", "off"):
                    v = ns_per_call([binary, "run", "--policy", "observe", "--tls", "off", "--entry-times", entry,
                                     "--ring-size", "256M", "--on-loss", "continue", "--db", db, "--",
                                     args.bench_syscalls, "getppid", str(args.calls)])
                    runs.setdefault((name, entry), []).append(v)
                    os.unlink(db)
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    bare = statistics.median(runs[("bare", "")])
    print(f"| getppid(), {args.calls} calls, {args.rounds} rounds | median ns (range) | added to bare (median) |")
    print("|---|---|---|")
    print(f"| bare | {bare:.1f} ({min(runs[('bare', '')]):.1f}..{max(runs[('bare', '')]):.1f}) | |")
    for name, binary in (("A", args.a), ("B", args.b)):
        for entry in ("on", "off"):
            v = runs[(name, entry)]
            print(f"| {name} ({binary}), --entry-times {entry} | {statistics.median(v):.1f} "
                  f"({min(v):.1f}..{max(v):.1f}) | +{statistics.median(v) - bare:.0f} ns |")


if __name__ == "__main__":
    main()
