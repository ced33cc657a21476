"""Client of flightrec's runtime grants (docs/POLICIES.md: Runtime grants).

One file, standard library only: copy it next to an agent framework.

    from flightrec_grants import Grants
    g = Grants("/run/flightrec/grants/SESSION.sock")
    gid = g.grant_write("/opt/cache", seconds=5, reason="pip install")
    ids = g.grant_connect("pypi.org", 443, uses=4, reason="pip install")
    ...
    g.revoke(gid, reason="step done")

Each call sends one JSON line on the session's grant socket and reads one
reply line; a refusal (not the session's owner, a malformed request, a path
that is no directory in the sandbox) raises GrantError with flightrec's
reason. Every grant, use, expiry and revocation is in the session's record.
"""
import json
import socket

__all__ = ["Grants", "GrantError"]


class GrantError(Exception):
    """flightrec refused a request; str(e) is its reason."""


class Grants:
    def __init__(self, path, timeout=10.0):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        self._sock.connect(path)
        self._in = self._sock.makefile("rb")

    def close(self):
        self._in.close()
        self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _ask(self, request):
        self._sock.sendall(json.dumps(request).encode() + b"\n")
        line = self._in.readline()
        if not line:
            raise GrantError("flightrec closed the grant socket")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise GrantError(reply.get("error", "refused"))
        return reply

    @staticmethod
    def _limits(request, seconds, uses):
        if seconds is not None:
            request["duration_ms"] = max(1, int(seconds * 1000))
        if uses is not None:
            request["uses"] = int(uses)
        return request

    def grant_write(self, directory, reason, seconds=None, uses=None):
        """Lets the session write under `directory` (its path inside the
        sandbox); for `seconds` and/or `uses` calls when given. Returns the
        grant's id."""
        req = {"op": "grant", "kind": "write", "path": directory, "reason": reason}
        return self._ask(self._limits(req, seconds, uses))["id"]

    def grant_syscall(self, name, reason, seconds=None, uses=None):
        """Lets the session make the system call `name` (one the policy's
        ask.syscalls lists). Returns the grant's id."""
        req = {"op": "grant", "kind": "syscall", "syscall": name, "reason": reason}
        return self._ask(self._limits(req, seconds, uses))["id"]

    def grant_connect(self, host, port, reason, seconds=None, uses=None):
        """Lets the session connect to `host`:`port` (policy ask.connect).
        A name is resolved here, and every address it has is granted the
        same limits (uses count per address). Returns the grants' ids.
        Connections made under a grant go on after it ends."""
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses = sorted({info[4][0] for info in infos})
        ids = []
        for address in addresses:
            req = {"op": "grant", "kind": "connect", "address": address, "port": int(port), "reason": reason}
            ids.append(self._ask(self._limits(req, seconds, uses))["id"])
        return ids

    def grant_name(self, name, port, reason, seconds=None):
        """Lets the session look `name` up and connect to what it is
        answered with, on `port` (0: any), as a network.allow entry by name
        would (policy ask.connect): `name` may be `*.domain`. The session's
        resolver admits each answer for its TTL. Returns the grant's id."""
        req = {"op": "grant", "kind": "name", "name": name, "port": int(port), "reason": reason}
        return self._ask(self._limits(req, seconds, None))["id"]

    def grant_exec(self, path, reason, seconds=None, uses=None):
        """Lets the session execute the file `path`, or files under the
        directory `path` (its path inside the sandbox; policy ask.exec).
        Returns the grant's id."""
        req = {"op": "grant", "kind": "exec", "path": path, "reason": reason}
        return self._ask(self._limits(req, seconds, uses))["id"]

    def revoke(self, grant_id, reason=""):
        self._ask({"op": "revoke", "id": int(grant_id), "reason": reason})

    def list(self):
        """The live grants and the calls waiting for one:
        {"grants": [...], "waiting": [{"ask", "pid", "syscall", "kind", what it
        asks for ("paths_hex", or "address" and "port"), "times_out_in_ms"}, ...]}."""
        reply = self._ask({"op": "list"})
        return {"grants": reply["grants"], "waiting": reply["waiting"]}
