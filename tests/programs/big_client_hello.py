#!/usr/bin/env python3
"""Sends one TLS ClientHello of about SIZE bytes to 127.0.0.1:PORT, its server
name and ALPN after a large key share (as post-quantum key shares make them),
then closes. Not a handshake: what a recorder reads of a hello is the test.

usage: big_client_hello.py PORT SERVER_NAME SIZE"""
import os
import socket
import struct
import sys


def ext(kind, body):
    return struct.pack("!HH", kind, len(body)) + body


def main():
    port, name, size = int(sys.argv[1]), sys.argv[2].encode(), int(sys.argv[3])
    share = os.urandom(max(0, size - 200))
    key_share = ext(51, struct.pack("!H", len(share) + 4) + struct.pack("!HH", 0x11EC, len(share)) + share)
    sni = ext(0, struct.pack("!HBH", len(name) + 3, 0, len(name)) + name)
    protos = b"".join(bytes([len(p)]) + p for p in (b"h2", b"http/1.1"))
    alpn = ext(16, struct.pack("!H", len(protos)) + protos)
    versions = ext(43, b"\x02\x03\x04")
    extensions = key_share + versions + sni + alpn
    body = (b"\x03\x03" + os.urandom(32) + b"\x00" + struct.pack("!H", 2) + b"\x13\x01" + b"\x01\x00" +
            struct.pack("!H", len(extensions)) + extensions)
    hello = b"\x01" + struct.pack("!I", len(body))[1:] + body
    record = b"\x16\x03\x01" + struct.pack("!H", len(hello)) + hello
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(record)
    print(len(record))


main()
