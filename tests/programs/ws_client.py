#!/usr/bin/env python3
"""A small WebSocket client (RFC 6455), standard library only, for the tests
of flightrecd's live stream. Prints each text message on its own line.

  ws_client.py (--port P [--token T] | --unix PATH) --path '/stream?...'
               [--count N] [--until-type TYPE] [--sleep S] [--rcvbuf BYTES]
               [--timeout S]

Stops after N messages (closing cleanly), after an entry of TYPE, or when
the server closes. Exit 0; 3 when the server refuses the upgrade (its
status line on stderr); 4 on a protocol error; 5 when --timeout seconds
pass without a byte from the server.
"""
import argparse
import base64
import hashlib
import json
import os
import socket
import struct
import sys
import time

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def recv_exact(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def send_frame(s, opcode, payload=b""):
    mask = os.urandom(4)
    head = bytes([0x80 | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    s.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))


def read_message(s):
    """(opcode, payload) of the next whole message; continuation frames joined."""
    message, first_op = b"", None
    while True:
        b0, b1 = recv_exact(s, 2)
        fin, op = b0 & 0x80, b0 & 0x0F
        if b1 & 0x80:
            raise ValueError("a server frame must not be masked")
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", recv_exact(s, 2))[0]
        elif n == 127:
            n = struct.unpack("!Q", recv_exact(s, 8))[0]
        payload = recv_exact(s, n)
        if op >= 0x8:  # control frames may come between fragments
            if op == 0x9:
                send_frame(s, 0xA, payload)
                continue
            return op, payload
        if first_op is None:
            first_op = op
        message += payload
        if fin:
            return first_op, message


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int)
    ap.add_argument("--unix")
    ap.add_argument("--token")
    ap.add_argument("--path", default="/stream")
    ap.add_argument("--count", type=int, default=0)
    ap.add_argument("--until-type")
    ap.add_argument("--sleep", type=float, default=0)
    ap.add_argument("--rcvbuf", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=0, help="give up (exit 5) after this long without a byte")
    a = ap.parse_args()
    if a.unix:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        target = a.unix
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        target = ("127.0.0.1", a.port)
    if a.rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, a.rcvbuf)
    if a.timeout:
        s.settimeout(a.timeout)
    s.connect(target)
    key = base64.b64encode(os.urandom(16))
    request = (f"GET {a.path} HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key.decode()}\r\nSec-WebSocket-Version: 13\r\n")
    if a.token:
        request += f"Authorization: Bearer {a.token}\r\n"
    s.sendall((request + "\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)
        if not chunk:
            print("the server closed before answering", file=sys.stderr)
            return 3
        head += chunk
    lines = head.decode("latin-1").split("\r\n")
    if not lines[0].startswith("HTTP/1.1 101"):
        print(lines[0], file=sys.stderr)
        return 3
    accept = base64.b64encode(hashlib.sha1(key + GUID).digest()).decode()
    if not any(l.lower() == f"sec-websocket-accept: {accept}".lower() for l in lines):
        print("wrong Sec-WebSocket-Accept", file=sys.stderr)
        return 4
    if a.sleep:
        time.sleep(a.sleep)
    got = 0
    try:
        while True:
            op, payload = read_message(s)
            if op == 0x8:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                print(f"closed by the server: {code}", file=sys.stderr)
                send_frame(s, 0x8, payload[:2])
                return 0
            if op != 0x1:
                continue
            text = payload.decode()
            print(text, flush=True)
            got += 1
            message = json.loads(text)
            if (a.count and got >= a.count) or (a.until_type and message.get("type") == a.until_type):
                send_frame(s, 0x8, struct.pack("!H", 1000))
                return 0
    except EOFError:
        print("the connection ended", file=sys.stderr)
        return 0
    except ValueError as e:
        print(e, file=sys.stderr)
        return 4


if __name__ == "__main__":
    try:
        sys.exit(main())
    except TimeoutError:
        print("no answer from the server in time", file=sys.stderr)
        sys.exit(5)
