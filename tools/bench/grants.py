#!/usr/bin/env python3
"""What runtime grants cost (not a test): `flightrec run` sessions of
bench_syscalls, with and without a policy that asks (docs/POLICIES.md: Runtime grants).

Rows, each a median over --reps sessions (spread = min..max):
- getppid(), a call no rule asks about: no `ask:` / `ask:` with write and a
  syscall (uname) asked; what every call that is not asked pays;
- open()+close() for writing in the work directory (the policy's writable
  tree): no `ask:` / `ask.write`: such opens still stop at the supervisor,
  which lets them go on (it cannot know the path before reading it);
- open()+close() for writing under a directory granted beforehand: the
  supervisor opens on the caller's behalf and hands the file over;
- getppid() asked (ask.syscalls) and granted beforehand;
- connect() to a loopback port: on the allowlist / off it under ask.connect
  and granted beforehand (a local listener's backlog holds them; drained
  between sessions).
The "added" column is against the same call in the session without `ask:`.
Every session is recorded in full, as `run` does by default.
usage: tools/bench/grants.py [--build build] [--reps 5] [--out FILE] [--only TEXT]
Needs root and a built tree.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import socket
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
from daemon import report  # noqa: E402
from flightrec_grants import Grants  # noqa: E402

GRANTED_DIR = "/opt/flightrec-bench-grants"


def session(flightrec, bench, policy, args, grant=None):
    """One recorded session of bench_syscalls ARGS under POLICY; GRANT
    (kind, target) is given before the workload starts. Returns its number."""
    tmp = tempfile.mkdtemp(prefix="flightrec-bench-")
    sock = os.path.join(tmp, "grants.sock")
    try:
        cmd = [flightrec, "run", "--policy", policy, "--db", os.path.join(tmp, "s.db"), "--tls", "off"]
        if grant:
            cmd += ["--grants", sock]
        cmd += ["--", "sh", "-c", 'read go; exec "$@"', "sh", bench] + args
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, cwd=tmp)
        if grant:
            for _ in range(400):
                if os.path.exists(sock):
                    break
                time.sleep(0.025)
            with Grants(sock) as g:
                kind, target = grant
                if kind == "write":
                    g.grant_write(target, reason="bench")
                elif kind == "connect":
                    g.grant_connect("127.0.0.1", target, reason="bench")
                else:
                    g.grant_syscall(target, reason="bench")
        out, err = p.communicate("go\n", timeout=600)
        if p.returncode != 0:
            sys.exit("grants.py: %s failed (%d): %s" % (" ".join(args), p.returncode, err.strip()[-400:]))
        return float(out.strip().splitlines()[-1])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def policy_file(directory, name, ask):
    path = os.path.join(directory, name + ".yaml")
    with open(path, "w") as f:
        f.write("version: 1\nname: %s\n%s" % (name, ask))
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out")
    ap.add_argument("--only", help="run only the rows whose name holds this text")
    args = ap.parse_args()
    flightrec = os.path.abspath(os.path.join(args.build, "flightrec"))
    bench = os.path.abspath(os.path.join(args.build, "tools", "bench", "bench_syscalls"))
    if os.geteuid() != 0:
        sys.exit("grants.py: needs root")
    os.makedirs(GRANTED_DIR, exist_ok=True)
    os.chmod(GRANTED_DIR, 0o777)  # the sandbox's ids are not the host's
    pdir = tempfile.mkdtemp(prefix="flightrec-bench-policies-")
    plain = policy_file(pdir, "plain", "")
    asking = policy_file(pdir, "asking", "ask:\n  write: true\n  syscalls: [uname]\n  timeout: 10s\n")
    asking_getppid = policy_file(pdir, "asking-getppid", "ask:\n  syscalls: [getppid]\n  timeout: 10s\n")
    # Connections wait in the backlog during a session (no accepting thread
    # taking turns on the two cores with the program, the supervisor and
    # the recorder) and are drained after it.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4096)
    listener.setblocking(False)
    port = listener.getsockname()[1]

    def drain():
        while True:
            try:
                listener.accept()[0].close()
            except OSError:
                return
    allowing = policy_file(pdir, "allowing", 'network:\n  mode: allowlist\n  allow: ["127.0.0.1:%d"]\n' % port)
    asking_connect = policy_file(pdir, "asking-connect", "network:\n  mode: allowlist\nask:\n  connect: true\n")
    n_calls, n_opens = "1000000", "20000"
    cases = [
        ("getppid(), not asked", "ns/call",
         (plain, ["getppid", n_calls], None), (asking, ["getppid", n_calls], None)),
        ("open+close for writing, work directory", "ns/pair",
         (plain, ["openw", n_opens, "f"], None), (asking, ["openw", n_opens, "f"], None)),
        ("open+close for writing, granted directory", "ns/pair",
         (plain, ["openw", n_opens, "f"], None),
         (asking, ["openw", n_opens, GRANTED_DIR + "/f"], ("write", GRANTED_DIR))),
        ("getppid(), asked and granted", "ns/call",
         (plain, ["getppid", "20000"], None), (asking_getppid, ["getppid", "20000"], ("syscall", "getppid"))),
        ("connect(), allowlisted / asked and granted", "ns/call",
         (allowing, ["connect", "2000", str(port)], None),
         (asking_connect, ["connect", "2000", str(port)], ("connect", port))),
    ]
    rows = ["| workload | unit | without `ask:` | with `ask:` | added |", "|---|---|---|---|---|"]
    for name, unit, base, asked in cases:
        if args.only and args.only not in name:
            continue
        without, with_ask = [], []
        for _ in range(args.reps):  # alternating, so drift hits both alike
            without.append(session(flightrec, bench, *base))
            drain()
            with_ask.append(session(flightrec, bench, *asked))
            drain()
        a, b = statistics.median(without), statistics.median(with_ask)
        rows.append("| %s | %s | %.0f (%.0f..%.0f) | %.0f (%.0f..%.0f) | %+.0f |" %
                    (name, unit, a, min(without), max(without), b, min(with_ask), max(with_ask), b - a))
        print(rows[-1], flush=True)
    listener.close()
    shutil.rmtree(pdir, ignore_errors=True)
    shutil.rmtree(GRANTED_DIR, ignore_errors=True)
    report(rows, args.out)


if __name__ == "__main__":
    main()
