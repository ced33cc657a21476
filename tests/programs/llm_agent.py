#!/usr/bin/python3
"""A minimal agent over the standard library, for the record's agent turns:
it asks the model (the mock API, tests/programs/mock_llm_api.py) over one
HTTPS keep-alive connection, runs each tool call the model makes (a shell
command with sh -c, or a file write), and sends the results back until the
model answers with text.  Python's ssl module is OpenSSL, whose plaintext
flightrec captures.

usage: llm_agent.py --port N --ca CA_PEM --api anthropic|openai [--stream] [--own-act]
                    [--repeat N] [--pad BYTES] [--http2]
--repeat runs the task N times over the connection; --pad sends a system
prompt of BYTES with every request, as real agents send kilobytes of it.
With --http2 it speaks HTTP/2 (ALPN h2, Debian's python3-h2), and beside each
model call it asks for the model list on another stream, so the answers of
two streams interleave on the connection.
With --abandon (Anthropic) it runs none of the model's tool calls: it runs
`sh -c "echo own-after > after.txt"` of its own accord and stops.
With --own-act it first runs `sh -c "echo own > own.txt"` of its own accord,
as agents run git or telemetry: an act no tool call explains.
Prints the final answer, and "tool <id>" for each tool call it ran."""
import argparse
import gzip
import http.client
import json
import os
import socket
import ssl
import subprocess
import sys


def sse(body):
    """(event, data) pairs of a text/event-stream body."""
    for block in body.decode().split("\n\n"):
        event, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())
        if data:
            yield event, "\n".join(data)


class H2Conn:
    """HTTP/2 over one TLS connection, each request on a new stream."""

    def __init__(self, port, ctx):
        import h2.config
        import h2.connection
        ctx.set_alpn_protocols(["h2"])
        self.port = port
        self.sock = ctx.wrap_socket(socket.create_connection(("localhost", port)), server_hostname="localhost")
        if self.sock.selected_alpn_protocol() != "h2":
            sys.exit("the server did not take h2")
        self.h2 = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.h2.initiate_connection()
        self.sock.sendall(self.h2.data_to_send())
        self.answers = {}

    def pump(self):
        import h2.events
        data = self.sock.recv(65536)
        if not data:
            sys.exit("the server closed the connection")
        for ev in self.h2.receive_data(data):
            if isinstance(ev, h2.events.ResponseReceived):
                self.answers[ev.stream_id][0].update(dict(ev.headers))
            elif isinstance(ev, h2.events.DataReceived):
                self.answers[ev.stream_id][1].extend(ev.data)
                self.h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                self.answers[ev.stream_id][2] = True
        self.sock.sendall(self.h2.data_to_send())

    def start(self, method, path, headers, body=b""):
        sid = self.h2.get_next_available_stream_id()
        self.answers[sid] = [{}, bytearray(), False]
        self.h2.send_headers(sid, [(":method", method), (":path", path), (":scheme", "https"),
                                   (":authority", "localhost:%d" % self.port)] + list(headers.items()),
                             end_stream=not body)
        view = memoryview(body)
        while view:
            n = min(len(view), self.h2.max_outbound_frame_size, self.h2.local_flow_control_window(sid))
            if not n:
                self.sock.sendall(self.h2.data_to_send())
                self.pump()  # wait for the window to open
                continue
            self.h2.send_data(sid, bytes(view[:n]), end_stream=n == len(view))
            view = view[n:]
        self.sock.sendall(self.h2.data_to_send())
        return sid

    def finish(self, sid):
        while not self.answers[sid][2]:
            self.pump()
        head, data, _ = self.answers.pop(sid)
        return head, bytes(data)

    def post(self, path, body, headers):
        side = self.start("GET", "/v1/models", {"accept": "application/json"})
        sid = self.start("POST", path, {k.lower(): v for k, v in headers.items()}, body)
        self.finish(side)
        return self.finish(sid)


def post(conn, path, body, headers):
    """As httpx does: JSON answers may come gzip-compressed."""
    headers = dict(headers, **{"content-type": "application/json", "accept-encoding": "gzip"})
    if isinstance(conn, H2Conn):
        head, raw = conn.post(path, json.dumps(body).encode(), headers)
        if head.get("content-encoding", "") == "gzip":
            raw = gzip.decompress(raw)
        return head.get("content-type", ""), raw
    conn.request("POST", path, body=json.dumps(body), headers=headers)
    r = conn.getresponse()
    raw = r.read()
    if r.getheader("content-encoding", "") == "gzip":
        raw = gzip.decompress(raw)
    return r.getheader("content-type", ""), raw


def run_shell(command):
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True).stdout


def write_file(path, content):
    with open(path, "w") as f:
        f.write(content)
    return "written"


def apply_patch(patch):
    """The '*** Add File:' hunks of an apply_patch input."""
    path, lines = None, []
    for line in patch.splitlines():
        if line.startswith("*** Add File: "):
            path = line[len("*** Add File: "):].strip()
        elif path and line.startswith("+"):
            lines.append(line[1:])
    return write_file(path, "".join(l + "\n" for l in lines)) if path else "no file"


PAD = ""
ABANDON = False


def anthropic(conn, stream):
    headers = {"x-api-key": "sk-ant-test-secret", "anthropic-version": "2023-06-01"}
    tools = [{"name": "Bash", "input_schema": {"type": "object"}}, {"name": "Write", "input_schema": {"type": "object"}}]
    messages = [{"role": "user", "content": "Working directory: " + os.getcwd() + "\nRun the command, then write the file."}]
    while True:
        body = {"model": "claude-mock-1", "max_tokens": 1024, "tools": tools, "messages": messages, "stream": stream}
        if PAD:
            body["system"] = PAD
        ctype, raw = post(conn, "/v1/messages", body, headers)
        if "event-stream" in ctype:
            content, partial = [], {}
            for event, data in sse(raw):
                d = json.loads(data)
                if d["type"] == "content_block_start":
                    content.append(dict(d["content_block"]))
                elif d["type"] == "content_block_delta" and d["delta"]["type"] == "input_json_delta":
                    partial[d["index"]] = partial.get(d["index"], "") + d["delta"]["partial_json"]
                elif d["type"] == "content_block_delta" and d["delta"]["type"] == "text_delta":
                    content[d["index"]]["text"] += d["delta"]["text"]
            for i, p in partial.items():
                content[i]["input"] = json.loads(p)
        else:
            content = json.loads(raw)["content"]
        calls = [c for c in content if c["type"] == "tool_use"]
        if not calls:
            return "".join(c.get("text", "") for c in content)
        if ABANDON:  # walks away from the model's tool calls, and acts of its own
            run_shell("echo own-after > after.txt")
            return "abandoned"
        messages.append({"role": "assistant", "content": content})
        results = []
        for c in calls:
            out = run_shell(c["input"]["command"]) if c["name"] == "Bash" else write_file(c["input"]["file_path"], c["input"]["content"])
            print("tool", c["id"], flush=True)
            results.append({"type": "tool_result", "tool_use_id": c["id"], "content": out})
        messages.append({"role": "user", "content": results})


def openai(conn, stream):
    headers = {"authorization": "Bearer sk-test-secret"}
    tools = [{"type": "function", "name": "shell_command", "parameters": {"type": "object"}},
             {"type": "custom", "name": "apply_patch"}]
    items = [{"role": "user", "content": "Run the command, then add the file."}]
    while True:
        body = {"model": "gpt-mock-1", "tools": tools, "input": items, "stream": stream}
        if PAD:
            body["instructions"] = PAD
        ctype, raw = post(conn, "/v1/responses", body, headers)
        if "event-stream" in ctype:
            output = [json.loads(d)["response"] for e, d in sse(raw) if e == "response.completed"][0]["output"]
        else:
            output = json.loads(raw)["output"]
        calls = [o for o in output if o["type"] in ("function_call", "custom_tool_call")]
        if not calls:
            return "".join(c["text"] for o in output for c in o.get("content", []))
        for c in calls:
            items.append(c)
            if c["type"] == "function_call":
                out = run_shell(json.loads(c["arguments"])["command"])
            else:
                out = apply_patch(c["input"])
            print("tool", c["call_id"], flush=True)
            kind = "function_call_output" if c["type"] == "function_call" else "custom_tool_call_output"
            items.append({"type": kind, "call_id": c["call_id"], "output": out})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--ca", required=True)
    p.add_argument("--api", choices=("anthropic", "openai"), required=True)
    p.add_argument("--stream", action="store_true")
    p.add_argument("--own-act", action="store_true")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--pad", type=int, default=0)
    p.add_argument("--http2", action="store_true")
    p.add_argument("--abandon", action="store_true")
    a = p.parse_args()
    global PAD, ABANDON
    ABANDON = a.abandon
    PAD = "You are a careful agent. " * (a.pad // 25)
    if a.own_act:
        run_shell("echo own > own.txt")
    ctx = ssl.create_default_context(cafile=a.ca)
    conn = H2Conn(a.port, ctx) if a.http2 else http.client.HTTPSConnection("localhost", a.port, context=ctx)
    for _ in range(a.repeat):
        print((anthropic if a.api == "anthropic" else openai)(conn, a.stream), flush=True)


if __name__ == "__main__":
    sys.exit(main())
