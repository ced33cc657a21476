#!/usr/bin/python3
"""A server that logs what reaches it, for the server-name tests: on ADDR,
TLS on port 8443 (CERT, KEY) and plain TCP on port 8081. Each connection
logs to LOG: "tcp PORT accepted", then for TLS "tls hello NAME" once the
ClientHello came (its server name), then "PORT got LINE" (the first line
of what was sent) and it answers "ok". Prints "ready" once it listens.
usage: sink_server.py ADDR CERT KEY LOG"""
import socket
import ssl
import sys
import threading

addr, cert, key, log_path = sys.argv[1:5]
lock = threading.Lock()


def log(line):
    with lock, open(log_path, "a") as f:
        f.write(line + "\n")


def first_line(conn):
    data = b""
    while b"\n" not in data and len(data) < 4096:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n")[0].split(b"\n")[0].decode(errors="replace")


def serve(conn, port, ctx):
    with conn:
        try:
            if ctx:
                conn = ctx.wrap_socket(conn, server_side=True)
            line = first_line(conn)
            log(f"{port} got {line}")
            conn.sendall(b"ok\n")
        except (OSError, ssl.SSLError) as e:
            log(f"{port} error {type(e).__name__}")


def listen(port, ctx):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(16)
    return s


def accept_loop(s, port, ctx):
    while True:
        conn, _ = s.accept()
        log(f"tcp {port} accepted")
        threading.Thread(target=serve, args=(conn, port, ctx), daemon=True).start()


ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ctx.sni_callback = lambda sslobj, name, c: log(f"tls hello {name}")
tls, plain = listen(8443, ctx), listen(8081, None)
threading.Thread(target=accept_loop, args=(tls, 8443, ctx), daemon=True).start()
print("ready", flush=True)
accept_loop(plain, 8081, None)
