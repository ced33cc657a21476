#!/usr/bin/env python3
"""An Alertmanager webhook receiver for tests: every POST body is appended,
one line each, to FILE; prints "PORT n" once listening on 127.0.0.1.

usage: webhook_sink.py FILE"""
import http.server
import sys


class Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
        with open(sys.argv[1], "ab") as f:
            f.write(body.replace(b"\n", b" ") + b"\n")
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Sink)
print("PORT", server.server_address[1], flush=True)
server.serve_forever()
