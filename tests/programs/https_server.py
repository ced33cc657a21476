#!/usr/bin/python3
"""A local HTTPS server for the TLS capture tests: serves DIR over TLS with
CERT/KEY on 127.0.0.1, on a port the kernel picks, which it writes to
PORT_FILE once it listens.  usage: https_server.py DIR CERT KEY PORT_FILE"""
import functools
import http.server
import ssl
import sys

directory, cert, key, port_file = sys.argv[1:5]


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=directory))
server.socket = ctx.wrap_socket(server.socket, server_side=True)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
