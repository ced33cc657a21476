#!/usr/bin/python3
"""Independent verifier for flightrec bundles, written from docs/FORMAT.md only.

usage: verify_bundle.py BUNDLE --pubkey PUBFILE [--checkpoint SAVED_CHECKPOINT_FILE]

Prints "OK: ..." and exits 0 when the bundle verifies (unterminated sessions
included, and named), "FAIL: ..." for the first failure and exits 1; usage
errors exit 2. Section numbers (§) refer to docs/FORMAT.md.
"""
import argparse
import base64
import hashlib
import json
import re
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


class Fail(Exception):  # the first failure: where ("entry N", "checkpoint at size N"), why
    def __init__(self, where, reason):
        super().__init__(f"{where}: {reason}")


def sha256(*parts):
    return hashlib.sha256(b"".join(parts)).digest()


def b64decode_strict(s):
    """Base64 per RFC 4648 §4 with padding; only the canonical encoding is accepted."""
    raw = base64.b64decode(s, validate=True)
    if base64.b64encode(raw).decode("ascii") != s:
        raise ValueError("non-canonical base64")
    return raw


# ---------------------------------------------------------------- §1 canonical JSON

I64_MIN, U64_MAX = -(2 ** 63), 2 ** 64 - 1  # §1: "parse them as 64-bit integers"
ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t",
           "\n": "\\n", "\f": "\\f", "\r": "\\r"}  # §1 / RFC 8785 §3.2.2.2


def canon_str(s):
    out = ['"']
    for ch in s:
        if ch in ESCAPES:
            out.append(ESCAPES[ch])
        elif ord(ch) < 0x20:
            out.append("\\u%04x" % ord(ch))  # other controls: \u00xx, lowercase hex
        else:
            out.append(ch)  # everything else as itself, incl. "/" and U+007F
    out.append('"')
    return "".join(out)


def canon(v):
    """Serialize a parsed value with the §1 rules."""
    if v is None or isinstance(v, (bool, float)):
        raise ValueError("true/false/null/float not allowed")
    if isinstance(v, int):
        if not I64_MIN <= v <= U64_MAX:
            raise ValueError(f"integer {v} out of 64-bit range")
        return str(v)  # decimal, no "+", no leading zeros; -0 parses to 0 and so mismatches
    if isinstance(v, str):
        return canon_str(v)
    if isinstance(v, list):
        return "[" + ",".join(canon(x) for x in v) + "]"
    if isinstance(v, dict):  # members sorted by the keys' bytes
        keys = sorted(v, key=lambda k: k.encode("utf-8"))
        return "{" + ",".join(canon_str(k) + ":" + canon(v[k]) for k in keys) + "}"
    raise ValueError(f"unexpected value type {type(v).__name__}")


def _no_dup_keys(pairs):
    obj = {}
    for k, v in pairs:
        if k in obj:
            raise ValueError(f"duplicate key {k!r}")
        obj[k] = v
    return obj


def _reject(token):
    raise ValueError(f"non-integer number {token}")


def strict_loads(text):  # json.loads without floats, NaN/Infinity or duplicate keys
    return json.loads(text, object_pairs_hook=_no_dup_keys,
                      parse_float=_reject, parse_constant=_reject)


def parse_canonical(raw):
    """§1: E must be UTF-8 JSON whose re-serialization is byte-identical."""
    text = raw.decode("utf-8")  # strict; a BOM survives decoding and json rejects it
    obj = strict_loads(text)
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    again = canon(obj).encode("utf-8")  # lone surrogates raise here
    if again != raw:
        at = next((i for i, (a, b) in enumerate(zip(raw, again)) if a != b),
                  min(len(raw), len(again)))
        raise ValueError(f"not in canonical form (first difference at byte {at})")
    return obj


def is_int(v):  # bool is a subclass of int in Python
    return isinstance(v, int) and not isinstance(v, bool)


# ---------------------------------------------------------------- §2 hashes, Merkle tree

class Log:
    """leaf_i, chain_i and the RFC 9162 tree, appended entry by entry.

    The tree is kept as a compact range: the roots of the perfect subtrees
    that D[0:n] splits into (sizes = the binary digits of n, largest first).
    Folding them right to left gives exactly RFC 9162 §2.1.1's MTH, whose
    split k is the largest power of 2 < n, i.e. the first of those subtrees.
    """

    def __init__(self):
        self.n = 0
        self.chain = bytes(32)   # chain_0 = 32 zero bytes
        self.ranges = []         # [(subtree size, subtree root)]

    def append(self, e):
        leaf = sha256(b"\x00", e)                # leaf_i = SHA-256(0x00 || E_i)
        self.chain = sha256(self.chain, leaf)    # chain_i = SHA-256(chain_{i-1} || leaf_i)
        self.n += 1
        size, node = 1, leaf
        while self.ranges and self.ranges[-1][0] == size:
            node = sha256(b"\x01", self.ranges.pop()[1], node)
            size *= 2
        self.ranges.append((size, node))

    def root(self):
        if not self.ranges:
            return sha256(b"")                   # MTH({}) = SHA-256("")
        node = self.ranges[-1][1]
        for _, left in reversed(self.ranges[:-1]):
            node = sha256(b"\x01", left, node)
        return node


# ---------------------------------------------------------------- §3 keys and checkpoints

# §3.2: the y of a point of order 8 (the other is p - y).
SMALL_ORDER_Y8 = int.from_bytes(bytes.fromhex(
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"), "little")


class VerifierKey:
    """§3.3: <name>+<hex key hash>+<base64(0x01 || 32-byte public key)>."""

    def __init__(self, line):
        parts = line.split("+", 2)  # the base64 key may itself contain "+"
        if len(parts) != 3:
            raise ValueError("expected name+hash+key")
        name, hexhash, b64 = parts
        if not name or not all(0x21 <= ord(c) <= 0x7E for c in name):
            raise ValueError("key name must be printable ASCII without spaces")
        if not re.fullmatch(r"[0-9a-f]{8}", hexhash):
            raise ValueError("key hash must be 8 lowercase hex digits")
        raw = b64decode_strict(b64)
        if len(raw) != 33 or raw[0] != 0x01:
            raise ValueError("key must be 0x01 || 32-byte Ed25519 key")
        # §3.2: no key of small order, no non-canonical encoding.
        y = int.from_bytes(raw[1:], "little") & ((1 << 255) - 1)
        p = 2 ** 255 - 19
        if y >= p or y in (0, 1, p - 1, SMALL_ORDER_Y8, p - SMALL_ORDER_Y8):
            raise ValueError("key is of small order or not canonical")
        # §3.2: key hash = first 4 bytes of SHA-256(name || 0x0A || 0x01 || key)
        self.hash = sha256(name.encode("ascii"), b"\n\x01", raw[1:])[:4]
        if self.hash.hex() != hexhash:
            raise ValueError(f"key hash {hexhash} does not match the key ({self.hash.hex()})")
        self.name, self.line = name, line
        self.pub = Ed25519PublicKey.from_public_bytes(raw[1:])


class Checkpoint:
    """§3.1 text (+ §3.2 signature lines), parsed but not yet checked."""

    def __init__(self, note, label, prefix=""):
        self.where = label
        if not isinstance(note, str):
            raise Fail(label, "checkpoint is not a string")
        # §3.1: no control but the newline, no DEL, anywhere in the note.
        if re.search("[\x00-\x09\x0b-\x1f\x7f]", note):
            raise Fail(label, "control characters in the note")
        split = note.rfind("\n\n")  # C2SP signed note: text, empty line, signatures
        self.text, sigs = (note[:split + 1], note[split + 2:]) if split >= 0 else (note, None)
        lines = self.text.split("\n")
        if len(lines) < 5 or lines[-1] != "" or "" in lines[:-1]:
            raise Fail(label, "checkpoint text must be 4 or more non-empty newline-terminated lines (§3.1)")
        self.origin, size, root, chain = lines[:4]
        if any(line.startswith("chain") for line in lines[4:-1]):
            raise Fail(label, "a chain line other than the fourth (§3.1)")
        if not re.fullmatch(r"flightrec/[A-Za-z0-9._-]+/[0-9a-f]{32}", self.origin):
            raise Fail(label, f"bad origin line {self.origin!r}")
        if not re.fullmatch(r"0|[1-9][0-9]*", size) or int(size) > 2 ** 63 - 1:
            raise Fail(label, f"bad tree size line {size!r}")
        self.size = int(size)
        self.where = f"{prefix}checkpoint at size {self.size}"
        if self.size == 0:  # §3.4: the first checkpoint covers the genesis entry
            raise Fail(self.where, "covers no entries, not even genesis")
        try:
            self.root = b64decode_strict(root)
        except ValueError:
            self.root = b""
        if len(self.root) != 32:
            raise Fail(self.where, f"bad root hash line {root!r}")
        m = re.fullmatch(r"chain ([0-9a-f]{64})", chain)
        if not m:
            raise Fail(self.where, f"bad chain line {chain!r}")
        self.chain = bytes.fromhex(m.group(1))
        self.sigs = []
        if sigs is not None:
            if not sigs.endswith("\n"):
                raise Fail(self.where, "signature block does not end with a newline")
            for line in sigs[:-1].split("\n"):  # §3.2: "— <key name> <base64>"
                m = re.fullmatch("\u2014 ([!-*,-~]+) ([A-Za-z0-9+/=]+)", line)
                if not m:
                    raise Fail(self.where, f"malformed signature line {line!r}")
                try:
                    blob = b64decode_strict(m.group(2))
                except ValueError:
                    raise Fail(self.where, "signature is not base64") from None
                if len(blob) < 5:  # §3.2: other keys' lines are checked for form only
                    raise Fail(self.where, "signature must be a 4-byte key hash and a signature")
                self.sigs.append((m.group(1), blob[:4], blob[4:]))

    def check_signed(self, origin, key):
        """§5.4 / §5.6: carries the origin, and is signed by the key when there is one."""
        if self.origin != origin:
            raise Fail(self.where, f"origin {self.origin!r} is not the session's {origin!r}")
        if key is None:  # §3.2: unsigned sessions have text-only checkpoints
            if self.sigs:
                raise Fail(self.where, "signed checkpoint in an unsigned session")
            return
        if not self.sigs:
            raise Fail(self.where, "checkpoint is not signed")
        mine = [sig for name, khash, sig in self.sigs  # other keys' lines are ignored (C2SP)
                if name == key.name and khash == key.hash]
        if not mine:
            raise Fail(self.where, f"no signature by key {key.name}+{key.hash.hex()}")
        for sig in mine:  # §3.2: every line by the key must verify
            if len(sig) != 64:
                raise Fail(self.where, "signature by the key is not 4 + 64 bytes")
            try:
                key.pub.verify(sig, self.text.encode("utf-8"))
            except InvalidSignature:
                raise Fail(self.where, f"bad Ed25519 signature by {key.name}") from None

    def check_tree(self, log):
        """§5.4: root = MTH(first s leaves) and chain = chain_s (log is at size s)."""
        assert log.n == self.size
        if self.root != log.root():
            raise Fail(self.where, "Merkle root does not match the entries")
        if self.chain != log.chain:
            raise Fail(self.where, "chain hash does not match the entries")


# ---------------------------------------------------------------- §5 verification

def split_saved(text):
    """§5.6: a saved-checkpoint file is signed notes one after another."""
    if not text:
        raise Fail("saved checkpoint", "the file holds no checkpoint")
    if not text.endswith("\n"):
        raise Fail("saved checkpoint", "the file does not end with a newline")
    lines, notes, i = text.split("\n")[:-1], [], 0
    while i < len(lines):
        start = i
        while i < len(lines) and lines[i] != "":
            i += 1
        signatures = i + 1
        i = signatures
        while i < len(lines) and lines[i].startswith("\u2014 "):
            i += 1
        if i == signatures:  # no blank line, or no signature line after it
            raise Fail("saved checkpoint", f"note {len(notes) + 1} is not signed")
        notes.append("\n".join(lines[start:i]) + "\n")
    return [Checkpoint(n, "saved checkpoint", "saved ") for n in notes]


class Session:
    def __init__(self, session_id, trusted_key, saved_note):
        self.id, self.key, self.trusted = session_id, trusted_key, trusted_key is not None
        self.saved = saved_note
        self.log = Log()
        self.origin = None
        self.ended = False
        self.last_cp = None        # size of the last checkpoint seen
        self.checkpoints = 0
        self.gaps = self.lost = 0
        self.every = 0             # §3.4: checkpoint_every_entries (0: no cadence to check)

    def entry(self, raw):
        i = self.log.n + 1
        where = f"entry {i}"
        if self.ended:  # §5.1: nothing may follow session_end
            raise Fail(where, "entry after session_end")
        try:
            e = parse_canonical(raw)  # §5.1 / §1
        except ValueError as err:
            raise Fail(where, str(err)) from None
        if e.get("seq") != i or not is_int(e.get("seq")):
            raise Fail(where, f"seq is {e.get('seq')!r}, expected {i} "
                              "(entry removed, inserted or reordered)")
        if e.get("session") != self.id or not is_int(e.get("session")):
            raise Fail(where, f"session is {e.get('session')!r}, expected {self.id} "
                              "(spliced in from another session)")
        kind = e.get("type")
        if not isinstance(kind, str) or not re.fullmatch(r"[a-z0-9_]{1,255}", kind):
            raise Fail(where, "no type, or not a word of a-z, 0-9 and _ (§1)")
        if (i == 1) != (kind == "genesis"):
            raise Fail(where, "entry 1 must be genesis and only entry 1")
        self.log.append(raw)  # §5.3
        if i == 1:
            self.genesis(e)
        if kind == "lost":  # §5.7
            if not is_int(e.get("lost")) or not 0 <= e["lost"] <= U64_MAX:
                raise Fail(where, "lost entry without an integer 'lost'")
            self.gaps += 1
            self.lost += e["lost"]
            if self.lost > U64_MAX:
                raise Fail(where, "the lost counts add up past 2^64 - 1")
        if kind == "session_end":  # §5.7: its totals are the record's
            if e.get("lost_total") != self.lost or not is_int(e.get("lost_total")):
                raise Fail(where, f"lost_total {e.get('lost_total')!r} is not the sum of the lost entries ({self.lost})")
            if e.get("entries_before") != i - 1 or not is_int(e.get("entries_before")):
                raise Fail(where, f"entries_before {e.get('entries_before')!r} is not {i - 1}")
        self.ended = kind == "session_end"
        for saved in self.saved:  # §5.6
            if saved.size == i:
                saved.check_tree(self.log)

    def genesis(self, g):
        """§5.2: origin and public_key come from the genesis entry."""
        if not isinstance(g.get("origin"), str):
            raise Fail("entry 1", "genesis has no origin")
        self.origin = g["origin"]
        pk = g.get("public_key")
        if self.trusted and pk != self.key.line:
            raise Fail("entry 1", f"genesis public_key is {pk or 'absent (unsigned session)'}, "
                                  f"not the trusted key {self.key.line}")
        if not self.trusted and pk is not None:
            try:
                self.key = VerifierKey(pk)
            except ValueError as err:
                raise Fail("entry 1", f"bad public_key in genesis: {err}") from None
        if ("key_id" in g or pk is not None) and (self.key is None or g.get("key_id") != self.key.hash.hex()):
            raise Fail("entry 1", "genesis key_id is not the key's hash")  # §5.2
        for name in ("policy", "host"):  # §5.2: one form or the other
            if name in g and name + "_b64" in g:
                raise Fail("entry 1", f"genesis has both {name} and {name}_b64")
        # §5.2: the genesis entry's other copies agree with what they copy.
        def member_bytes(name):
            if isinstance(g.get(name), str):
                return g[name].encode("utf-8")
            if isinstance(g.get(name + "_b64"), str):
                try:
                    return b64decode_strict(g[name + "_b64"])
                except ValueError:
                    pass
            raise Fail("entry 1", f"genesis has no {name}")
        if g.get("policy_sha256") != hashlib.sha256(member_bytes("policy")).hexdigest():
            raise Fail("entry 1", "policy_sha256 is not the SHA-256 of the policy")
        if not member_bytes("host"):
            raise Fail("entry 1", "genesis host is empty")
        host = "".join(chr(b) if chr(b).isascii() and (chr(b).isalnum() or chr(b) in "._-") else "_"
                       for b in member_bytes("host"))
        if not re.fullmatch(re.escape(f"flightrec/{host}/") + "[0-9a-f]{32}", self.origin):
            raise Fail("entry 1", f"origin {self.origin!r} does not name the host as §5.2 says")
        every = g.get("checkpoint_every_entries")
        if "checkpoint_every_entries" in g and not (is_int(every) and every > 0):
            raise Fail("entry 1", "checkpoint_every_entries is not a positive integer (§5.2)")
        self.every = every or 0
        for saved in self.saved:  # §5.6: each is this session's, signed by its key
            saved.check_signed(self.origin, self.key)

    def checkpoint(self, cp):
        """§5.4, called once the log holds exactly cp.size entries."""
        if self.last_cp is not None and cp.size <= self.last_cp:
            raise Fail(cp.where, "checkpoints not in increasing tree size (or two of one size)")
        if self.every and cp.size - (self.last_cp or 0) > self.every:  # §3.4 cadence
            raise Fail(cp.where, f"more than {self.every} entries after the previous checkpoint: one was removed")
        cp.check_signed(self.origin, self.key)
        cp.check_tree(self.log)
        self.last_cp, self.checkpoints = cp.size, self.checkpoints + 1

    def finish(self):
        n = self.log.n
        if n == 0:
            raise Fail("entry 1", "missing: the session has no genesis entry")
        for saved in self.saved:  # §5.6
            if saved.size > n:
                raise Fail(saved.where, f"record has only {n} entries: it was cut back")
        sealed = self.last_cp or 0
        if not self.ended and self.every and n - sealed >= self.every:  # §3.4 cadence
            raise Fail(f"entry {sealed + self.every}", f"not covered by a checkpoint though one is taken "
                                                       f"every {self.every} entries: one was removed")
        if self.ended and sealed != n:  # §5.5
            raise Fail(f"entry {n}", f"session_end is not covered by a checkpoint (last "
                                     f"is size {sealed}): end checkpoint removed or entries appended")
        signer = (f"signed by {self.key.name}+{self.key.hash.hex()}"
                  + ("" if self.trusted else " (key from genesis, not pinned)")
                  if self.key else "unsigned: integrity only")
        parts = [f"{n} entries", f"{self.checkpoints} checkpoints {signer}"]
        for saved in self.saved:
            parts.append(f"saved checkpoint at size {saved.size} matches")
        gaps = f"{self.gaps} gaps ({self.lost} events lost)"
        if self.ended:
            return f"OK: session {self.id}: complete with {gaps}; " + ", ".join(parts)
        return (f"OK: session {self.id}: unterminated (no session_end): sealed up to entry "
                f"{sealed}, {n - sealed} entries after it only chained; {gaps}; " + ", ".join(parts))


# ---------------------------------------------------------------- §4 bundles

JSON_MEMBERS = {"checkpoints", "entries", "format", "format_version", "public_key", "session"}
LINES_MEMBERS = {"format", "format_version", "public_key", "session"}


def check_header(h, fmt, members):
    """§4: exactly the members shown (duplicates are refused by strict_loads)."""
    if (not isinstance(h, dict) or set(h) != members or h.get("format") != fmt or h.get("format_version") != 1
            or not is_int(h.get("format_version")) or not is_int(h.get("session"))
            or not 1 <= h["session"] <= 2 ** 63 - 1 or not isinstance(h.get("public_key"), str)):
        raise Fail("bundle", f"not a {fmt} version 1 header with exactly the members of §4")
    return h["session"]


def verify_json(doc, key, saved):
    """§4.1: one document with "entries" and "checkpoints" (increasing tree size)."""
    sess = Session(check_header(doc, "flightrec-bundle", JSON_MEMBERS), key, saved)
    entries, cps = doc.get("entries"), doc.get("checkpoints")
    if not isinstance(entries, list) or not isinstance(cps, list):
        raise Fail("bundle", "entries and checkpoints must be arrays")
    numbered = enumerate(cps, 1)  # parsed one by one, as the entries reach their size
    def next_cp():
        k, note = next(numbered, (0, None))
        return k and Checkpoint(note, f"checkpoint #{k}")

    cp = next_cp()
    for i, e in enumerate(entries, 1):
        if not isinstance(e, str):
            raise Fail(f"entry {i}", "not a JSON string")
        try:
            raw = e.encode("utf-8")
        except UnicodeEncodeError:
            raise Fail(f"entry {i}", "not valid UTF-8 (lone surrogate)") from None
        sess.entry(raw)
        while cp and cp.size <= sess.log.n:
            if cp.size < sess.log.n:
                raise Fail(cp.where, "checkpoints not in increasing tree size")
            sess.checkpoint(cp)
            cp = next_cp()
    if cp:  # §5.4
        raise Fail(cp.where, f"only {sess.log.n} entries: entries were removed from the end")
    return sess.finish()


def verify_lines(f, header, key, saved):
    """§4.2: header line, then entry lines with {"checkpoint": note} lines after them."""
    sess = Session(check_header(header, "flightrec-bundle-lines", LINES_MEMBERS), key, saved)
    cp_no = 0
    for lineno, line in enumerate(f, 2):
        if not line.endswith(b"\n"):  # §4.2: every line ends with a newline
            raise Fail("bundle", f"line {lineno} does not end with a newline (cut short?)")
        line = line[:-1]  # the line without its newline is E_i
        if b"\r" in line or b"\0" in line:  # §4.2: LF alone ends a line; §4: no NUL
            raise Fail("bundle", f"line {lineno} holds a carriage return or NUL byte")
        try:
            obj = strict_loads(line.decode("utf-8"))
        except (ValueError, RecursionError):
            obj = None  # not JSON: let the entry check report it
        if line.startswith(b'{"checkpoint":'):  # §4.2: such a line is a checkpoint
            if not isinstance(obj, dict) or set(obj) != {"checkpoint"}:
                raise Fail("bundle", f"line {lineno}: a checkpoint line must hold exactly one member, checkpoint")
            cp_no += 1
            cp = Checkpoint(obj["checkpoint"], f"checkpoint #{cp_no} (line {lineno})")
            if cp.size != sess.log.n:
                raise Fail(cp.where, f"placed after entry {sess.log.n} instead of after the "
                                     f"entry that completes it (entries removed or reordered)")
            sess.checkpoint(cp)
        else:
            sess.entry(line)
    return sess.finish()


def main():
    ap = argparse.ArgumentParser(description="Verify a flightrec bundle from FORMAT.md alone.")
    ap.add_argument("bundle")
    ap.add_argument("--pubkey", help="verifier key file (§3.3) the checkpoints must be signed with")
    ap.add_argument("--checkpoint", help="checkpoints of this session kept elsewhere, a saved-checkpoint file (§5.6)")
    args = ap.parse_args()
    try:
        key_text = args.pubkey and open(args.pubkey, encoding="utf-8").read()
        # §3.3: the line, or the line and one newline.
        key = args.pubkey and VerifierKey(key_text[:-1] if key_text.endswith("\n") else key_text)
        saved_text = args.checkpoint and open(args.checkpoint, "rb").read()
        f = open(args.bundle, "rb")
    except (OSError, ValueError) as err:
        print(f"usage error: {err}", file=sys.stderr)
        return 2
    session = "?"
    try:
        saved = []
        if saved_text is not None:
            try:
                saved = split_saved(saved_text.decode("utf-8"))
            except UnicodeDecodeError:
                raise Fail("saved checkpoint", "not UTF-8") from None
        with f:
            first = f.readline()
            try:
                header = strict_loads(first.decode("utf-8"))
            except (ValueError, RecursionError):
                header = None
            if isinstance(header, dict) and header.get("format") == "flightrec-bundle-lines":
                session = header.get("session", "?")
                if b"\r" in first or b"\0" in first or first.startswith(b"\xef\xbb\xbf"):
                    raise Fail("bundle", "the header holds a byte order mark, carriage return or NUL byte")
                if not first.endswith(b"\n"):
                    raise Fail("bundle", "line 1 does not end with a newline (cut short?)")
                msg = verify_lines(f, header, key, saved)
            else:
                try:
                    doc = strict_loads((first + f.read()).decode("utf-8"))
                except (ValueError, RecursionError) as err:  # RecursionError: absurdly deep nesting
                    raise Fail("bundle", f"not a JSON bundle: {err}") from None
                session = doc.get("session", "?") if isinstance(doc, dict) else "?"
                msg = verify_json(doc, key, saved)
    except Fail as err:
        print(f"FAIL: session {session} {err}")
        return 1
    print(msg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
