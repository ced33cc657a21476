#!/usr/bin/env python3
"""The coding agents' task, bare and under flightrec (benchmarks, not tests).

What a user of Claude Code or Codex feels: the wall time of one task (a
shell command, then a file edit, driven by tests/programs/mock_llm_api.py
over HTTPS with a test CA) from the agent's start to its exit, run bare,
under `flightrec run` with the agent's shipped policy (sandbox, record,
TLS capture on; Codex with its own -s workspace-write sandbox in ours),
the same with `--tls off` (what capturing the agent's model traffic
costs: Claude Code's BoringSSL found and probed), and under `strace -f`
(the ptrace peer), runners taking turns round by round. Prints the best and the median of each with the slowest run, and
the ratios to bare; with --out, a Markdown section.

usage: tools/bench/agents.py [--build build] [--reps 5] [--out FILE]
Needs root, a built tree and the agents tools/install-deps.sh installs.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

AGENTS = "/opt/flightrec-test-agents/node_modules/.bin/"
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROMPT = "Run a shell command, then write hello.txt"


def make_ca(d):
    run = lambda *a: subprocess.run(a, check=True, capture_output=True)
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
        f"{d}/ca-key.pem", "-out", f"{d}/ca.pem", "-days", "2", "-subj", "/CN=flightrec bench CA", "-addext",
        "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
        f"{d}/key.pem", "-out", f"{d}/cert.csr", "-subj", "/CN=localhost")
    with open(f"{d}/leaf.ext", "w") as f:
        f.write("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run("openssl", "x509", "-req", "-in", f"{d}/cert.csr", "-CA", f"{d}/ca.pem", "-CAkey", f"{d}/ca-key.pem",
        "-CAcreateserial", "-out", f"{d}/cert.pem", "-days", "2", "-extfile", f"{d}/leaf.ext")


def start_mock(d, options=()):
    """The mock API (Debian's python3: its python3-h2 serves --http2)."""
    p = subprocess.Popen(["/usr/bin/python3", f"{SOURCE}/tests/programs/mock_llm_api.py", "--port", "0", "--cert",
                          f"{d}/cert.pem", "--key", f"{d}/key.pem", *options], stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line.startswith("PORT "):
        sys.exit("agents.py: the mock API did not start")
    return p, int(line.split()[1])


def fresh_work(root, n):
    work = os.path.join(root, f"w{n}")
    os.makedirs(work)
    subprocess.run(["git", "init", "-q", "."], cwd=work, check=True)
    return work


def claude(port, ca):
    env = {"ANTHROPIC_API_KEY": "sk-ant-bench", "ANTHROPIC_BASE_URL": f"https://127.0.0.1:{port}",
           "NODE_EXTRA_CA_CERTS": ca, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "IS_SANDBOX": "1"}
    return "claude-code", env, [AGENTS + "claude", "-p", PROMPT, "--dangerously-skip-permissions"]


def codex(port, ca, home):
    os.makedirs(home, exist_ok=True)
    with open(f"{home}/config.toml", "w") as f:
        f.write(f'model = "gpt-5.5"\nmodel_provider = "mock"\n[model_providers.mock]\nname = "mock"\n'
                f'base_url = "https://127.0.0.1:{port}/v1"\nwire_api = "responses"\nenv_key = "MOCK_API_KEY"\n'
                '[analytics]\nenabled = false\n[features]\nplugins = false\n')
    env = {"MOCK_API_KEY": "sk-bench", "SSL_CERT_FILE": ca, "CODEX_HOME": home}
    return "codex", env, [AGENTS + "codex", "exec", "--skip-git-repo-check", "-s", "workspace-write", PROMPT]


def timed(argv, env, cwd):
    t = time.monotonic()
    r = subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True)
    dt = time.monotonic() - t
    ok = r.returncode == 0 and os.path.exists(os.path.join(cwd, "hello.txt"))
    if not ok:
        print(f"agents.py: {argv[0]} ... failed (exit {r.returncode}): {r.stderr.decode(errors='replace')[-400:]}",
              file=sys.stderr)
    return dt if ok else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out")
    args = ap.parse_args()
    flightrec = os.path.abspath(os.path.join(args.build, "flightrec"))
    if os.geteuid() != 0 or not os.access(AGENTS + "claude", os.X_OK):
        sys.exit("agents.py: needs root and the agents (tools/install-deps.sh)")
    # The agents' files (the CA, Codex's home) where the sandbox can read
    # them: not under /tmp, which it gets as its own.
    root = tempfile.mkdtemp(prefix="flightrec-bench-agents-", dir="/var/tmp")
    os.chmod(root, 0o755)  # traversable by the sandbox's ids (root inside is not root outside)
    lines = []
    try:
        make_ca(root)
        mock, port = start_mock(root)
        ca = f"{root}/ca.pem"
        base_env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
        results = {}
        n = 0
        for name, extra, argv in (claude(port, ca), codex(port, ca, f"{root}/codex-home")):
            times = {"bare": [], "flightrec": [], "--tls off": [], "strace -f": []}
            for rep in range(args.reps + 1):  # the first round warms caches and is not counted
                order = list(times)
                order = order[rep % len(order):] + order[:rep % len(order)]
                for runner in order:
                    n += 1
                    work = fresh_work(root, n)
                    env = dict(base_env, HOME=f"{root}/home{n}", **extra)
                    os.makedirs(env["HOME"])
                    if runner == "bare":
                        cmd = argv
                    elif runner == "strace -f":
                        cmd = ["strace", "-f", "-qq", "-o", "/dev/null"] + argv
                    else:
                        db = f"{root}/s{n}.db"
                        cmd = [flightrec, "run", "--policy", name, "--db", db, "--allow", f"127.0.0.1:{port}"]
                        if runner == "--tls off":
                            cmd += ["--tls", "off"]
                        for k in extra:
                            cmd += ["--env", k]
                        if name == "codex":
                            cmd += ["--env", f"CODEX_HOME={root}/codex-home-run{n}"]
                            # Its own, fresh, owned by root inside (host uid 1000000000: docs/POLICIES.md).
                            home = f"{root}/codex-home-run{n}"
                            os.makedirs(home)
                            shutil.copy(f"{root}/codex-home/config.toml", home)
                            for f in (home, f"{home}/config.toml"):
                                os.chown(f, 1000000000, 1000000000)
                            env["CODEX_HOME"] = f"{root}/codex-home-run{n}"
                        cmd += ["--"] + argv
                    t = timed(cmd, env, work)
                    if rep:
                        times[runner].append(t)
            results[name] = times
        mock.terminate()
        header = f"{'agent':<12} {'runner':<10} {'best s':>8} {'median s':>9} {'slowest s':>10} {'best vs bare':>13} {'median vs bare':>15}"
        lines.append(header)
        for name, times in results.items():
            bare = times["bare"]
            for runner, ts in times.items():
                ok = [t for t in ts if t == t]
                if not ok:
                    lines.append(f"{name:<12} {runner:<10} failed in all {len(ts)} runs")
                    continue
                best, med, worst = min(ok), statistics.median(ok), max(ok)
                bb, bm = min(t for t in bare if t == t), statistics.median([t for t in bare if t == t])
                failed = f" ({len(ts) - len(ok)} of {len(ts)} failed)" if len(ok) < len(ts) else ""
                lines.append(f"{name:<12} {runner:<10} {best:8.2f} {med:9.2f} {worst:10.2f} {best / bb:12.2f}x "
                             f"{med / bm:14.2f}x{failed}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("\n".join(lines))
    if args.out:
        with open(args.out, "a") as f:
            f.write("\n```\n" + "\n".join(lines) + "\n```\n")


if __name__ == "__main__":
    main()
