#!/usr/bin/python3
"""A local HTTP/2 server over TLS (ALPN h2) for the redaction tests: answers
every request with status 200, a set-cookie and x-served-by header, and the
body "hello h2\\n"; writes its port to PORT_FILE once it listens.
usage: h2_server.py CERT KEY PORT_FILE  (Debian's python3-h2)"""
import os
import socket
import ssl
import sys
import threading

import h2.config
import h2.connection
import h2.events

cert, key, port_file = sys.argv[1:4]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ctx.set_alpn_protocols(["h2"])


def serve(raw):
    with ctx.wrap_socket(raw, server_side=True) as s:
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False))
        conn.initiate_connection()
        s.sendall(conn.data_to_send())
        while True:
            data = s.recv(65536)
            if not data:
                return
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    conn.send_headers(event.stream_id, [(":status", "200"), ("set-cookie", "session=server-s3cret"),
                                                        ("x-served-by", "h2_server")])
                    conn.send_data(event.stream_id, b"hello h2\n", end_stream=True)
            s.sendall(conn.data_to_send())


listener = socket.create_server(("127.0.0.1", 0))
with open(port_file + ".tmp", "w") as f:
    f.write(str(listener.getsockname()[1]))
os.rename(port_file + ".tmp", port_file)
while True:
    client, _ = listener.accept()
    threading.Thread(target=serve, args=(client,), daemon=True).start()
