#!/usr/bin/env python3
"""An OTLP/HTTP receiver for tests: each POST's body is written to DIR as
N.pb or N.json (by its Content-Type), N counting from 1, and answered 200
with an empty ExportTraceServiceResponse; prints "PORT n" once listening
on 127.0.0.1. HTTP/1.1 keep-alive, as collectors answer.

usage: otlp_sink.py DIR"""
import http.server
import itertools
import os
import sys
import threading

_numbers = itertools.count(1)
_lock = threading.Lock()


class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
        kind = "json" if "json" in self.headers.get("Content-Type", "") else "pb"
        with _lock:
            n = next(_numbers)
        path = os.path.join(sys.argv[1], "%d.%s" % (n, kind))
        with open(path + ".tmp", "wb") as f:
            f.write(body)
        os.rename(path + ".tmp", path)
        self.send_response(200)
        self.send_header("Content-Type", self.headers.get("Content-Type", "application/x-protobuf"))
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
print("PORT", server.server_address[1], flush=True)
server.serve_forever()
