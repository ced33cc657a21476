#!/usr/bin/env python3
"""Refreshes vmlinux/syscalls_x86_64.txt, flightrec's one syscall table,
from a running kernel's own syscall metadata (tracefs events/syscalls).

    tools/gen-syscall-table.py [--tracefs DIR] [--check] [TABLE]

The table has one line per x86-64 syscall number: "NR NAME ARGS", where ARGS
are the kernel's parameter declarations ("const char * filename; int flags")
or "-" when the kernel at hand has no metadata for it (not built in, or
gone). Numbers come from the kernel's arch/x86/entry/syscalls/syscall_64.tbl
and are added by hand when a kernel adds a syscall: this tool fails and
names every syscall the kernel has that the table lacks. The argument lists
are what it refreshes. With --check it changes nothing and fails when the
table and the kernel disagree (the runtime tests run it that way).
"""
import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_TABLE = os.path.join(ROOT, "vmlinux", "syscalls_x86_64.txt")
# The kernel's metadata names a few syscalls by their implementation.
ALIASES = {"stat": "newstat", "fstat": "newfstat", "lstat": "newlstat", "uname": "newuname",
           "sendfile": "sendfile64", "umount2": "umount"}
SKIP_FIELDS = {"__syscall_nr"}


def tracefs_dir(given):
    for d in [given] if given else ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]:
        if d and os.path.isdir(os.path.join(d, "events", "syscalls")):
            return d
    if given:
        sys.exit(f"gen-syscall-table: no events/syscalls under {given}")
    d = "/sys/kernel/tracing"
    if subprocess.call(["mount", "-t", "tracefs", "nodev", d], stderr=subprocess.DEVNULL) == 0:
        return d
    sys.exit("gen-syscall-table: tracefs is not mounted and cannot be (run as root)")


def kernel_syscalls(tracefs):
    """name -> "decl; decl" from sys_enter_NAME/format."""
    out = {}
    base = os.path.join(tracefs, "events", "syscalls")
    for entry in os.listdir(base):
        if not entry.startswith("sys_enter_"):
            continue
        decls = []
        with open(os.path.join(base, entry, "format")) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("field:") or "common_" in line:
                    continue
                decl = line[len("field:"):line.index(";")]
                if decl.split()[-1] not in SKIP_FIELDS:
                    decls.append(decl)
        out[entry[len("sys_enter_"):]] = "; ".join(decls)
    return out


def read_table(path):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.rstrip("\n").split(" ", 2)
            if len(parts) < 3 or not parts[0].isdigit():
                sys.exit(f"{path}:{n}: expected 'NR NAME ARGS'")
            rows.append((int(parts[0]), parts[1], parts[2]))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table", nargs="?", default=DEFAULT_TABLE)
    ap.add_argument("--tracefs")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    kernel = kernel_syscalls(tracefs_dir(a.tracefs))
    rows = read_table(a.table)
    names = {name for _, name, _ in rows}
    known = names | {ALIASES[n] for n in names if n in ALIASES}
    problems = [f"the kernel has {k}, which the table lacks: add its number" for k in sorted(kernel) if k not in known]
    new_rows = []
    for nr, name, args in rows:
        fresh = kernel.get(ALIASES.get(name, name))
        fresh = "-" if fresh is None else (fresh or "void")
        # A syscall this kernel lacks keeps what an earlier kernel said.
        if fresh == "-" and args != "-":
            fresh = args
        if fresh != args:
            problems.append(f"{name} ({nr}): table says '{args}', the kernel '{fresh}'")
        new_rows.append((nr, name, fresh))
    if a.check:
        for p in problems:
            print("gen-syscall-table:", p, file=sys.stderr)
        return 1 if problems else 0
    missing = [p for p in problems if "lacks" in p]
    for p in missing:
        print("gen-syscall-table:", p, file=sys.stderr)
    with open(a.table) as f:
        header = [l for l in f if l.startswith("#")]
    with open(a.table, "w") as f:
        f.writelines(header)
        for nr, name, args in new_rows:
            f.write(f"{nr} {name} {args}\n")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
