#!/usr/bin/python3
"""A scripted stand-in for the Anthropic Messages API and the OpenAI Responses
API, served over HTTPS, to drive Claude Code and Codex through a fixed task:

  1. a tool call that runs a shell command  (SHELL_COMMAND, writes tool_ran.txt)
  2. a tool call that creates a file        (EDIT_FILE with EDIT_TEXT)
  3. a final text answer

The step is read from the request itself (how many tool results it carries),
never from server state, so retries and side requests do not upset it.  Any
other request (count_tokens, start-up probes, unknown paths) gets a harmless
200 answer.  Every request is logged as one JSON line to --log.

usage: mock_llm_api.py --cert CERT --key KEY [--port N] [--log FILE]
                       [--script auto|anthropic-edit|openai-edit] [--http2] [--parallel]
With --port 0 (the default) the kernel picks the port; the first line on
stdout is always "PORT <n>".  --script auto (the default) scripts both APIs,
chosen by path (/v1/messages, /v1/responses); anthropic-edit or openai-edit
scripts only that one and gives the other path the generic answer.  With
--http2 it offers h2 in ALPN as well (Debian's python3-h2) and answers a
client that takes it over HTTP/2, each event of a stream in its own DATA frame.
See mock_llm_api.md for the certificates and the agents' set-up."""
import argparse
import base64
import gzip
import http.client
import http.server
import itertools
import json
import os
import random
import re
import socketserver
import ssl
import string
import sys
import threading
import time

SHELL_COMMAND = "echo flightrec-tool-ran > tool_ran.txt"
PARALLEL_COMMAND = "echo flightrec-second-ran > second_ran.txt"  # --parallel: beside SHELL_COMMAND
EDIT_FILE = "hello.txt"
EDIT_TEXT = "edited by agent\n"
FINAL_TEXT = "Done: ran the command and wrote hello.txt."

_log_lock = threading.Lock()
_conn_ids = itertools.count(1)
_args = None


def rand_id(prefix, n=24):
    return prefix + "".join(random.choices(string.ascii_letters + string.digits, k=n))


def log(entry):
    if not _args.log:
        return
    with _log_lock, open(_args.log, "a") as f:
        f.write(json.dumps(entry) + "\n")


# ---------------------------------------------------------------- Anthropic

def anthropic_step(body):
    """How many tool results the conversation already holds."""
    n = 0
    for m in body.get("messages", []):
        if m.get("role") == "user" and isinstance(m.get("content"), list):
            n += sum(1 for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result")
    return n


def texts(obj):
    """Every string in a JSON value (system prompt, messages), depth first."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, list):
        for x in obj:
            yield from texts(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from texts(x)


def find_cwd(text):
    m = re.search(r"(?:Primary working directory|Working directory|<cwd>)\s*:?\s*(/[^\s<]*)", text)
    return m.group(1) if m else None


def anthropic_reply(body):
    """Returns (content blocks, stop_reason, note)."""
    tools = {t.get("name") for t in body.get("tools", []) if isinstance(t, dict)}
    if "Bash" not in tools:  # a side request (title, quota probe, ...): just text
        return [{"type": "text", "text": "OK"}], "end_turn", "side"
    step = anthropic_step(body)
    if step == 0 and _args.parallel:  # two shell calls in one answer; then the final text
        return [{"type": "tool_use", "id": rand_id("toolu_01"), "name": "Bash", "input": {"command": c}}
                for c in (SHELL_COMMAND, PARALLEL_COMMAND)], "tool_use", "shell"
    if step >= 2 and _args.parallel:
        return [{"type": "text", "text": FINAL_TEXT}], "end_turn", "final"
    if step == 0:
        inp = {"command": SHELL_COMMAND, "description": "Write a marker file"}
        return [{"type": "tool_use", "id": rand_id("toolu_01"), "name": "Bash", "input": inp}], "tool_use", "shell"
    if step == 1:
        cwd = find_cwd("\n".join(texts([body.get("system"), body.get("messages")])))
        path = os.path.join(cwd, EDIT_FILE) if cwd else EDIT_FILE
        inp = {"file_path": path, "content": EDIT_TEXT}
        return [{"type": "tool_use", "id": rand_id("toolu_01"), "name": "Write", "input": inp}], "tool_use", "edit"
    return [{"type": "text", "text": FINAL_TEXT}], "end_turn", "final"


def anthropic_message(body, content, stop_reason):
    return {"id": rand_id("msg_01"), "type": "message", "role": "assistant",
            "model": body.get("model", "claude-mock"), "content": content,
            "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 20,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}


def anthropic_events(msg):
    start = dict(msg, content=[], stop_reason=None, usage=dict(msg["usage"], output_tokens=1))
    yield "message_start", {"type": "message_start", "message": start}
    for i, block in enumerate(msg["content"]):
        if block["type"] == "text":
            yield "content_block_start", {"type": "content_block_start", "index": i,
                                          "content_block": {"type": "text", "text": ""}}
            yield "content_block_delta", {"type": "content_block_delta", "index": i,
                                          "delta": {"type": "text_delta", "text": block["text"]}}
        else:
            yield "content_block_start", {"type": "content_block_start", "index": i,
                                          "content_block": dict(block, input={})}
            args = json.dumps(block["input"])
            half = len(args) // 2
            for part in (args[:half], args[half:]):
                yield "content_block_delta", {"type": "content_block_delta", "index": i,
                                              "delta": {"type": "input_json_delta", "partial_json": part}}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
                            "usage": {"output_tokens": msg["usage"]["output_tokens"]}}
    yield "message_stop", {"type": "message_stop"}


# ------------------------------------------------------------------- OpenAI

def openai_step(body):
    items = body.get("input", [])
    if not isinstance(items, list):
        return 0
    return sum(1 for it in items if isinstance(it, dict) and str(it.get("type", "")).endswith("call_output"))


def openai_reply(body):
    """Returns (output items, note)."""
    tools = {}
    for t in body.get("tools", []):
        if isinstance(t, dict):
            tools[t.get("name") or t.get("type")] = t
    step = openai_step(body)
    if not tools:
        step = 2
    if step == 0:
        call = {"type": "function_call", "id": rand_id("fc_"), "call_id": rand_id("call_"), "status": "completed"}
        if "shell_command" in tools:
            call.update(name="shell_command", arguments=json.dumps({"command": SHELL_COMMAND}))
        elif "exec_command" in tools:
            call.update(name="exec_command", arguments=json.dumps({"cmd": SHELL_COMMAND}))
        elif "local_shell" in tools:
            call = {"type": "local_shell_call", "id": rand_id("lsh_"), "call_id": call["call_id"],
                    "status": "completed",
                    "action": {"type": "exec", "command": ["bash", "-lc", SHELL_COMMAND]}}
        else:
            call.update(name="shell", arguments=json.dumps({"command": ["bash", "-lc", SHELL_COMMAND]}))
        return [call], "shell"
    if step == 1:
        patch = f"*** Begin Patch\n*** Add File: {EDIT_FILE}\n" + "".join(
            "+" + line + "\n" for line in EDIT_TEXT.splitlines()) + "*** End Patch\n"
        tool = tools.get("apply_patch")
        if tool and tool.get("type") == "custom":
            return [{"type": "custom_tool_call", "id": rand_id("ctc_"), "call_id": rand_id("call_"),
                     "status": "completed", "name": "apply_patch", "input": patch}], "edit"
        if tool:
            return [{"type": "function_call", "id": rand_id("fc_"), "call_id": rand_id("call_"),
                     "status": "completed", "name": "apply_patch",
                     "arguments": json.dumps({"input": patch})}], "edit"
        # no apply_patch tool: Codex still intercepts apply_patch run via the shell
        body = dict(body, input=[])
        call = openai_reply(body)[0][0]
        shell = f"apply_patch <<'EOF'\n{patch}EOF\n"
        if call["type"] == "local_shell_call":
            call["action"]["command"] = ["bash", "-lc", shell]
        else:
            args = json.loads(call["arguments"])
            key = "cmd" if "cmd" in args else "command"
            args[key] = shell if isinstance(args[key], str) else ["bash", "-lc", shell]
            call["arguments"] = json.dumps(args)
        return [call], "edit"
    return [{"type": "message", "id": rand_id("msg_"), "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": FINAL_TEXT, "annotations": []}]}], "final"


def openai_response(body, output, status="completed"):
    return {"id": rand_id("resp_"), "object": "response", "created_at": int(time.time()),
            "status": status, "model": body.get("model", "gpt-mock"), "output": output,
            "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": 120}}


def openai_events(resp):
    seq = 0

    def ev(kind, **fields):
        nonlocal seq
        seq += 1
        return kind, dict(type=kind, sequence_number=seq - 1, **fields)

    yield ev("response.created", response=dict(resp, status="in_progress", output=[]))
    yield ev("response.in_progress", response=dict(resp, status="in_progress", output=[]))
    for i, item in enumerate(resp["output"]):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield ev("response.output_item.added", output_index=i,
                     item=dict(item, status="in_progress", content=[]))
            yield ev("response.content_part.added", item_id=item["id"], output_index=i, content_index=0,
                     part={"type": "output_text", "text": "", "annotations": []})
            yield ev("response.output_text.delta", item_id=item["id"], output_index=i, content_index=0,
                     delta=text)
            yield ev("response.output_text.done", item_id=item["id"], output_index=i, content_index=0,
                     text=text)
            yield ev("response.content_part.done", item_id=item["id"], output_index=i, content_index=0,
                     part=item["content"][0])
        elif item["type"] == "function_call":
            yield ev("response.output_item.added", output_index=i,
                     item=dict(item, status="in_progress", arguments=""))
            yield ev("response.function_call_arguments.delta", item_id=item["id"], output_index=i,
                     delta=item["arguments"])
            yield ev("response.function_call_arguments.done", item_id=item["id"], output_index=i,
                     arguments=item["arguments"])
        elif item["type"] == "custom_tool_call":
            yield ev("response.output_item.added", output_index=i, item=dict(item, status="in_progress", input=""))
            yield ev("response.custom_tool_call_input.delta", item_id=item["id"], output_index=i,
                     delta=item["input"])
            yield ev("response.custom_tool_call_input.done", item_id=item["id"], output_index=i,
                     input=item["input"])
        else:
            yield ev("response.output_item.added", output_index=i, item=dict(item, status="in_progress"))
        yield ev("response.output_item.done", output_index=i, item=item)
    yield ev("response.completed", response=resp)


# ------------------------------------------------------------------- server

LOGGED_HEADERS = ("host", "user-agent", "content-type", "accept", "anthropic-version", "anthropic-beta",
                  "x-app", "originator", "session_id", "openai-beta", "x-stainless-retry-count",
                  "transfer-encoding", "content-encoding", "connection")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mock-llm-api/1"

    def setup(self):
        # TLS handshake here, in the connection's own thread, not in accept()
        self.conn = next(_conn_ids)
        self.request = self.server.tls.wrap_socket(self.request, server_side=True)
        super().setup()

    def log_message(self, *args):
        pass

    def handle(self):
        if self.request.selected_alpn_protocol() == "h2":
            return serve_h2(self.conn, self.request)
        super().handle()

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                chunk = self.rfile.read(size + 2)[:size]
                if size == 0:
                    break
                data += chunk
            return data
        return self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))

    def send_json(self, obj, status=200):
        data = json.dumps(obj).encode()
        gzipped = "gzip" in self.headers.get("Accept-Encoding", "")  # as the real APIs answer who asks
        if gzipped:
            data = gzip.compress(data)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if gzipped:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", rand_id("req_"))
        self.end_headers()
        self.wfile.write(data)

    def send_sse(self, events):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("request-id", rand_id("req_"))
        self.end_headers()
        for kind, data in events:
            chunk = f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def handle_any(self):
        raw = self.read_body() if self.command in ("POST", "PUT", "PATCH") else b""
        wire = raw  # the body as it came (a recorder's capture is compared with it)
        if self.headers.get("Content-Encoding", "").lower() == "gzip":
            raw = gzip.decompress(raw)
        try:  # (zstd bodies, which the standard library cannot decode, stay raw)
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = self.path.split("?")[0]
        entry = {"time": time.time(), "conn": self.conn, "method": self.command, "path": self.path,
                 "headers": {k: v for k, v in self.headers.items() if k.lower() in LOGGED_HEADERS},
                 "body": body if body is not None else raw.decode(errors="replace"),
                 "wire_b64": base64.b64encode(wire).decode(), "chunked": self.headers.get("Transfer-Encoding", "").lower() == "chunked"}
        script = _args.script
        if self.command == "POST" and path.endswith("/messages/count_tokens"):
            entry["reply"] = "count_tokens"
            log(entry)
            self.send_json({"input_tokens": 100})
        elif self.command == "POST" and path.endswith("/messages") and script in ("auto", "anthropic-edit"):
            content, stop, note = anthropic_reply(body or {})
            msg = anthropic_message(body or {}, content, stop)
            entry["reply"] = note
            entry["step"] = anthropic_step(body or {})
            entry["reply_id"] = msg["id"]
            entry["tool_ids"] = [c["id"] for c in content if c["type"] == "tool_use"]
            log(entry)
            if (body or {}).get("stream"):
                self.send_sse(anthropic_events(msg))
            else:
                self.send_json(msg)
        elif self.command == "POST" and path.endswith("/responses") and script in ("auto", "openai-edit"):
            if body is None:
                entry["reply"] = "undecodable"
                log(entry)
                return self.send_json({"error": {"message": "send plain JSON"}}, 400)
            output, note = openai_reply(body)
            resp = openai_response(body, output)
            entry["reply"] = note
            entry["step"] = openai_step(body)
            entry["reply_id"] = resp["id"]
            entry["tool_ids"] = [o["call_id"] for o in output if "call_id" in o]
            log(entry)
            if body.get("stream"):
                self.send_sse(openai_events(resp))
            else:
                self.send_json(resp)
        elif self.command == "GET" and path.endswith("/models"):
            entry["reply"] = "models"
            log(entry)
            self.send_json({"object": "list", "data": [], "models": []})
        else:
            entry["reply"] = "other"
            log(entry)
            self.send_json({})

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

    def do_HEAD(self):  # Claude Code's connection warm-up: HEAD /api/hello
        log({"time": time.time(), "conn": self.conn, "method": "HEAD", "path": self.path, "reply": "other"})
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


class H2Exchange:
    """One HTTP/2 request, shaped as Handler sees a request, so handle_any
    answers both protocols the same way."""

    def __init__(self, conn_id, h2conn, sock, stream, headers, body):
        self.conn, self.h2, self.sock, self.stream, self.raw = conn_id, h2conn, sock, stream, bytes(body)
        self.command, self.path = headers.get(":method", ""), headers.get(":path", "")
        self.headers = http.client.HTTPMessage()
        for k, v in headers.items():
            if not k.startswith(":"):
                self.headers[k] = v

    def read_body(self):
        return self.raw

    def send(self, data, end):
        """DATA frames of at most the peer's frame size, within its windows."""
        import h2.events
        view = memoryview(data)
        while True:
            n = min(len(view), self.h2.max_outbound_frame_size, self.h2.local_flow_control_window(self.stream))
            if n or not view:
                self.h2.send_data(self.stream, bytes(view[:n]), end_stream=end and n == len(view))
                self.sock.sendall(self.h2.data_to_send())
                view = view[n:]
                if not view:
                    return
                continue
            data_in = self.sock.recv(65536)  # wait for a WINDOW_UPDATE
            if not data_in:
                return
            for ev in self.h2.receive_data(data_in):
                if isinstance(ev, h2.events.DataReceived):
                    self.h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            self.sock.sendall(self.h2.data_to_send())

    def send_json(self, obj, status=200):
        data = json.dumps(obj).encode()
        gzipped = "gzip" in self.headers.get("Accept-Encoding", "")
        if gzipped:
            data = gzip.compress(data)
        head = [(":status", str(status)), ("content-type", "application/json"), ("content-length", str(len(data))),
                ("request-id", rand_id("req_"))] + ([("content-encoding", "gzip")] if gzipped else [])
        self.h2.send_headers(self.stream, head, end_stream=not data)
        if data:
            self.send(data, True)
        self.sock.sendall(self.h2.data_to_send())

    def send_sse(self, events):
        self.h2.send_headers(self.stream, [(":status", "200"), ("content-type", "text/event-stream"),
                                           ("cache-control", "no-cache"), ("request-id", rand_id("req_"))])
        self.sock.sendall(self.h2.data_to_send())
        for kind, data in events:
            self.send(f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode(), False)
        self.send(b"", True)


def serve_h2(conn_id, sock):
    import h2.config
    import h2.connection
    import h2.events
    h2conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
    h2conn.initiate_connection()
    sock.sendall(h2conn.data_to_send())
    streams = {}
    while True:
        data = sock.recv(65536)
        if not data:
            return
        for ev in h2conn.receive_data(data):
            if isinstance(ev, h2.events.RequestReceived):
                streams[ev.stream_id] = (dict(ev.headers), bytearray())
            elif isinstance(ev, h2.events.DataReceived):
                streams[ev.stream_id][1].extend(ev.data)
                h2conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id in streams:
                headers, body = streams.pop(ev.stream_id)
                Handler.handle_any(H2Exchange(conn_id, h2conn, sock, ev.stream_id, headers, body))
        sock.sendall(h2conn.data_to_send())


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        log({"time": time.time(), "error": repr(sys.exc_info()[1])})


def main():
    global _args
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--log")
    p.add_argument("--script", default="auto", choices=("auto", "anthropic-edit", "openai-edit"))
    p.add_argument("--http2", action="store_true", help="offer h2 in ALPN too")
    p.add_argument("--parallel", action="store_true",
                   help="Anthropic: two shell tool calls in the first answer, then the final text")
    _args = p.parse_args()
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(_args.cert, _args.key)
    tls.set_alpn_protocols(["h2", "http/1.1"] if _args.http2 else ["http/1.1"])
    server = Server(("127.0.0.1", _args.port), Handler)
    server.tls = tls
    print("PORT", server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
