#!/usr/bin/env python3
"""What egress by name costs (not a test): `flightrec run` sessions under a
policy whose allowlist names hosts (policies/README.md: Egress by name),
against the same work without flightrec.

Rows (medians over --reps sessions; spread = min..max of the sessions' medians):
- a UDP query of an allowed name the session's resolver has cached, sent by
  the sandboxed program and answered (microseconds per query, median and 90th
  percentile of 2000);
- a query of a name the policy refuses (answered at once, never asked upstream);
- getaddrinfo() of a cached allowed name, as an agent's runtime asks (glibc:
  an A and an AAAA query);
- the same UDP query sent straight to the upstream server without flightrec
  (tests/programs/dns_server.py, a Python server: what an uncached lookup
  adds at least);
- bulk TCP (256 MiB over loopback) to an address admitted by name, to one on
  the allowlist by address, and without flightrec: what every packet of an
  admitted connection pays (the cgroup_skb programs look the address up);
- short connections (connect, an HTTP request, the answer, close) to an
  address admitted by name, whose first payload's Host the egress program
  reads and checks (network.sni), to one on the allowlist by address (not
  read), and without flightrec: microseconds per connection.
usage: tools/bench/names.py [--build build] [--reps 5] [--out FILE]
Needs root and a built tree.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon import report  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
NET = "127.79.%d." % (os.getpid() % 200 + 1)

CLIENT = r'''
import socket, struct, sys, time
mode, n = sys.argv[1], int(sys.argv[2])
def query(name):
    q = struct.pack('>HHHHHH', 1, 0x0100, 1, 0, 0, 0)
    for label in name.split('.'):
        q += bytes([len(label)]) + label.encode()
    return q + b'\0' + struct.pack('>HH', 1, 1)
if mode in ('cached', 'refused', 'upstream'):
    ns = sys.argv[3] if mode == 'upstream' else [l.split()[1] for l in open('/etc/resolv.conf') if l.startswith('nameserver')][0]
    q = query('evil.bench' if mode == 'refused' else 'api.bench')
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect((ns, 53)); s.settimeout(5)
    s.send(q); s.recv(512)  # warms the cache
    took = []
    for _ in range(n):
        t = time.perf_counter_ns(); s.send(q); s.recv(512); took.append(time.perf_counter_ns() - t)
    took.sort(); print(took[n // 2] / 1000, took[n * 9 // 10] / 1000)
elif mode == 'getaddrinfo':
    socket.getaddrinfo('api.bench', 443)
    took = []
    for _ in range(n):
        t = time.perf_counter_ns(); socket.getaddrinfo('api.bench', 443); took.append(time.perf_counter_ns() - t)
    took.sort(); print(took[n // 2] / 1000, took[n * 9 // 10] / 1000)
elif mode == 'conns':  # conns N ADDR|NAME: connect, request, answer, close
    addr = socket.getaddrinfo(sys.argv[3], 9001, socket.AF_INET)[0][4][0]
    req = b'GET /x HTTP/1.1\r\nHost: api.bench\r\nUser-Agent: bench\r\n\r\n'
    took = []
    for _ in range(n):
        t = time.perf_counter_ns()
        c = socket.create_connection((addr, 9001)); c.sendall(req); c.recv(16); c.close()
        took.append(time.perf_counter_ns() - t)
    took.sort(); print(took[n // 2] / 1000, took[n * 9 // 10] / 1000)
else:  # bulk ADDR|NAME: 256 MiB to its port 9000, MB/s (a name looked up first, untimed)
    addr = socket.getaddrinfo(sys.argv[3], 9000, socket.AF_INET)[0][4][0]
    c = socket.create_connection((addr, 9000)); chunk = b'x' * (1 << 20)
    t = time.perf_counter()
    for _ in range(256):
        c.sendall(chunk)
    c.shutdown(socket.SHUT_WR); c.recv(1)
    print(256 / (time.perf_counter() - t), 0)
'''

SINK = r'''
import socket, sys, threading
def listen(port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((sys.argv[1], port)); s.listen(64)
    return s
bulk, answer = listen(9000), listen(9001)
def answering():  # one request, one answer
    while True:
        c, _ = answer.accept(); c.recv(4096); c.sendall(b'HTTP/1.1 200 OK\r\n'); c.close()
threading.Thread(target=answering, daemon=True).start()
print('ready', flush=True)
while True:
    c, _ = bulk.accept()
    while c.recv(1 << 20):
        pass
    c.close()
'''


def run(cmd, cwd):
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit("names.py: %s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()[-400:]))
    median, p90 = p.stdout.split()
    return float(median), float(p90)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("names.py: needs root")
    flightrec = os.path.abspath(os.path.join(args.build, "flightrec"))
    tmp = tempfile.mkdtemp(prefix="flightrec-bench-names-")
    procs = []
    try:
        with open(os.path.join(tmp, "zone.json"), "w") as f:
            json.dump({"api.bench": {"A": [NET + "1"], "ttl": 3600}}, f)
        with open(os.path.join(tmp, "client.py"), "w") as f:
            f.write(CLIENT)
        with open(os.path.join(tmp, "sink.py"), "w") as f:
            f.write(SINK)
        procs.append(subprocess.Popen(["/usr/bin/python3", os.path.join(ROOT, "tests/programs/dns_server.py"), NET + "53",
                                       os.path.join(tmp, "zone.json"), os.path.join(tmp, "queries.log")],
                                      stdout=subprocess.PIPE, text=True))
        for host in ("1", "2"):
            procs.append(subprocess.Popen(["/usr/bin/python3", os.path.join(tmp, "sink.py"), NET + host],
                                          stdout=subprocess.PIPE, text=True))
        for p in procs:
            p.stdout.readline()
        policy = os.path.join(tmp, "names.yaml")
        with open(policy, "w") as f:
            f.write('version: 1\nname: names\nextends: agent\nnetwork:\n  mode: allowlist\n'
                    '  allow: ["api.bench:443", "api.bench:9000", "api.bench:9001", "%s2:9000", "%s2:9001"]\n'
                    '  dns_upstream: ["%s53"]\n  dns_private: true\n' % (NET, NET, NET))  # the bench's addresses are loopback ones

        def in_session(*client_args):
            return run([flightrec, "run", "--policy", policy, "--db", os.path.join(tmp, "s.db"), "--tls", "off",
                        "--", "python3", "client.py"] + list(client_args), tmp)

        def bare(*client_args):
            return run(["/usr/bin/python3", "client.py"] + list(client_args), tmp)

        cases = [
            ("UDP query, cached allowed name", "us/query", lambda: in_session("cached", "2000")),
            ("UDP query, refused name", "us/query", lambda: in_session("refused", "2000")),
            ("getaddrinfo(), cached allowed name (A + AAAA)", "us/call", lambda: in_session("getaddrinfo", "1000")),
            ("UDP query straight to the upstream, no flightrec", "us/query", lambda: bare("upstream", "2000", NET + "53")),
            ("bulk TCP to an address admitted by name", "MB/s", lambda: in_session("bulk", "0", "api.bench")),
            ("bulk TCP to an address on the allowlist", "MB/s", lambda: in_session("bulk", "0", NET + "2")),
            ("bulk TCP, no flightrec", "MB/s", lambda: bare("bulk", "0", NET + "1")),
            ("connection + HTTP request, address admitted by name (Host read)", "us/conn",
             lambda: in_session("conns", "500", "api.bench")),
            ("connection + HTTP request, address on the allowlist", "us/conn", lambda: in_session("conns", "500", NET + "2")),
            ("connection + HTTP request, no flightrec", "us/conn", lambda: bare("conns", "500", NET + "1")),
        ]
        rows = ["| workload | unit | median | 90th percentile (median) |", "|---|---|---|---|"]
        for name, unit, measure in cases:
            got = []
            for _ in range(args.reps):
                got.append(measure())
                if os.path.exists(os.path.join(tmp, "s.db")):
                    for suffix in ("", "-wal", "-shm"):
                        if os.path.exists(os.path.join(tmp, "s.db" + suffix)):
                            os.unlink(os.path.join(tmp, "s.db" + suffix))
            medians = [g[0] for g in got]
            p90 = statistics.median(g[1] for g in got)
            rows.append("| %s | %s | %.1f (%.1f..%.1f) | %s |" % (name, unit, statistics.median(medians), min(medians),
                                                                  max(medians), "%.1f" % p90 if p90 else "-"))
            print(rows[-1], flush=True)
        report(rows, args.out)
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
