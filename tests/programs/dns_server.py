#!/usr/bin/python3
"""A test's own DNS server, authoritative for whatever its zone file says.

    dns_server.py ADDRESS ZONE.json LOG

ZONE.json maps names to {"A": [...], "AAAA": [...], "CNAME": "other", "ttl": N};
"A_seq": [[...], [...]] gives the k-th A query of the name the k-th list (the
last one from then on), so a name's address can change mid-session. The file
is read again for every query.
Any other name is NXDOMAIN. UDP and TCP on ADDRESS port 53; each question
("name type transport") is appended to LOG, so a test can tell which
queries reached it. Prints "ready" once it listens.
"""
import json
import socket
import struct
import sys
import threading

ADDRESS, ZONE, LOG = sys.argv[1], sys.argv[2], sys.argv[3]
TYPES = {1: "A", 28: "AAAA", 5: "CNAME"}
asked = {}  # name -> A queries answered so far


def read_name(msg, at):
    labels = []
    while msg[at]:
        n = msg[at]
        labels.append(msg[at + 1:at + 1 + n].decode("ascii", "replace"))
        at += 1 + n
    return ".".join(labels).lower(), at + 1


def encode_name(name):
    out = b""
    for label in name.split("."):
        out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def answer(query, transport):
    qid, flags = struct.unpack(">HH", query[:4])
    name, end = read_name(query, 12)
    qtype = struct.unpack(">H", query[end:end + 2])[0]
    with open(LOG, "a") as log:
        log.write("%s %s %s\n" % (name, TYPES.get(qtype, qtype), transport))
    with open(ZONE) as f:
        zone = json.load(f)
    records = b""
    count = 0
    at = name
    rcode = 3
    for _ in range(8):
        entry = zone.get(at)
        if entry is None:
            break
        rcode = 0
        ttl = entry.get("ttl", 60)
        if "CNAME" in entry:
            target = entry["CNAME"]
            data = encode_name(target)
            records += encode_name(at) + struct.pack(">HHIH", 5, 1, ttl, len(data)) + data
            count += 1
            at = target
            continue
        addrs = entry.get(TYPES.get(qtype, ""), [])
        if qtype == 1 and "A_seq" in entry:
            k = asked.get(at, 0)
            asked[at] = k + 1
            addrs = entry["A_seq"][min(k, len(entry["A_seq"]) - 1)]
        for addr in addrs:
            family = socket.AF_INET if qtype == 1 else socket.AF_INET6
            data = socket.inet_pton(family, addr)
            records += encode_name(at) + struct.pack(">HHIH", qtype, 1, ttl, len(data)) + data
            count += 1
        break
    head = struct.pack(">HHHHHH", qid, 0x8400 | (flags & 0x0100) | rcode, 1, count, 0, 0)
    return head + query[12:end + 4] + records


def serve_udp(s):
    while True:
        query, peer = s.recvfrom(4096)
        try:
            s.sendto(answer(query, "udp"), peer)
        except Exception as e:  # a query it cannot read: no answer
            print("dns_server:", e, file=sys.stderr)


def serve_tcp_client(c):
    with c:
        while True:
            head = c.recv(2)
            if len(head) < 2:
                return
            n = struct.unpack(">H", head)[0]
            query = b""
            while len(query) < n:
                more = c.recv(n - len(query))
                if not more:
                    return
                query += more
            reply = answer(query, "tcp")
            c.sendall(struct.pack(">H", len(reply)) + reply)


def serve_tcp(s):
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve_tcp_client, args=(c,), daemon=True).start()


udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind((ADDRESS, 53))
tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
tcp.bind((ADDRESS, 53))
tcp.listen(8)
threading.Thread(target=serve_tcp, args=(tcp,), daemon=True).start()
threading.Thread(target=serve_udp, args=(udp,), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
