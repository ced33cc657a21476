#!/usr/bin/env python3
"""An agent loop that asks for what each step needs (docs/POLICIES.md: Runtime grants).

The agent's tool is one shell inside `flightrec run --policy examples/ask.yaml`;
each step is a command sent to it, and before a step that writes outside the
work directory the loop grants that directory for the step alone, then
revokes it. The last step is not granted: it fails, and the record says why.
What the steps write stays in the session's overlay, as every write does.

    sudo examples/agent_loop.py [--flightrec build/flightrec] [--db steps.db]
    flightrec query --db steps.db --type grant --type grant_use --type grant_denied
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from flightrec_grants import Grants, GrantError  # noqa: E402

# A directory outside the work directory that the steps may need. A grant
# lifts the sandbox's rule for it, not file permissions, and the sandbox's
# user ids are not the host's: the directory is made writable by anyone.
CACHE = "/opt/flightrec-example-cache"

# (what the step is for, the directory it needs, the command)
STEPS = [
    ("look around", None, "ls -a"),
    ("fill the package cache", CACHE, f"mkdir -p {CACHE}/wheels && echo wheel > {CACHE}/wheels/pkg.whl"),
    ("read the cache back", None, f"cat {CACHE}/wheels/pkg.whl"),
    ("write there without a grant", None, f"echo x > {CACHE}/late.txt"),
]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flightrec", default="flightrec")
    ap.add_argument("--db", default="agent-steps.db")
    args = ap.parse_args()
    os.makedirs(CACHE, exist_ok=True)
    os.chmod(CACHE, 0o777)
    sock = os.path.join(tempfile.mkdtemp(prefix="flightrec-grants-"), "grants.sock")
    shell = subprocess.Popen(
        [args.flightrec, "run", "--policy", os.path.join(here, "ask.yaml"), "--db", args.db,
         "--grants", sock, "--", "sh"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    for _ in range(200):  # the socket appears once the sandbox is up
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    with Grants(sock) as grants:
        for why, directory, command in STEPS:
            gid = grants.grant_write(directory, reason=why, seconds=30) if directory else None
            # Each step ends with a marker line carrying its exit status.
            shell.stdin.write(command + " 2>&1; echo __step_done $?\n")
            shell.stdin.flush()
            for line in shell.stdout:
                if line.startswith("__step_done"):
                    print(f"step: {why}: exit {line.split()[1]}")
                    break
                print("   ", line, end="")
            if gid is not None:
                grants.revoke(gid, reason="step done")
    shell.stdin.close()
    return shell.wait()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except GrantError as e:
        sys.exit(f"agent_loop: {e}")
