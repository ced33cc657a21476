#!/bin/bash
# Installs what flightrec needs to build and test on Debian 12 (as root).
# chromium renders `flightrec report` pages in the tests (headless); golang-go
# builds the Go TLS client and libnss3-tools brings tstclnt (NSS) for the TLS
# capture tests. rsyslog (with its OpenSSL driver) and nats-server (JetStream)
# receive the shipping tests' outputs; libnats is loaded when an output or
# `flightrec collect` needs it.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends \
  cmake make g++ pkg-config ccache \
  clang llvm libbpf-dev bpftool \
  libsqlite3-dev libzstd-dev zlib1g-dev libbrotli-dev libssl-dev libboost-program-options-dev nlohmann-json3-dev libsimdjson-dev doctest-dev \
  libseccomp-dev libyaml-cpp-dev libcapstone-dev \
  util-linux coreutils procps systemd \
  python3 python3-cryptography python3-pip python3-h2 git openssl curl wget prometheus prometheus-alertmanager libnss3-tools golang-go \
  qemu-system-x86 busybox-static cpio kmod xz-utils zstd e2fsprogs \
  rsyslog rsyslog-openssl nats-server libnats-dev gdb \
  chromium

# Docker's own seccomp profile, used as is by the sandbox tests (the package
# that carries it pulls in half of Go, so only the file is taken from it).
profile=/var/cache/flightrec-test/docker-seccomp-default.json
if [ ! -s "$profile" ]; then
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download -q golang-github-docker-docker-dev >/dev/null 2>&1 &&
   dpkg-deb -x golang-github-docker-docker-dev_*.deb x &&
   mkdir -p "$(dirname "$profile")" &&
   cp x/usr/share/gocode/src/github.com/docker/docker/profiles/seccomp/default.json "$profile") ||
    echo "warning: could not fetch Docker's seccomp profile; its test will fail" >&2
  rm -rf "$tmp"
fi

# The coding agents the agent tests drive (tests/runtime/test_agents.cpp),
# from npm at pinned versions, where the sandbox can read them (/opt); and
# an older Claude Code (3.5 months before) and Codex (4 months before), in
# older/, so finding their statically linked TLS functions is shown to
# survive releases.
agents=/opt/flightrec-test-agents
claude_version=2.1.332 codex_version=0.171.0 older_claude_version=2.1.236 older_codex_version=0.145.0
if ! command -v npm >/dev/null; then apt-get install -y -q --no-install-recommends nodejs npm; fi
versions="$claude_version $codex_version $older_claude_version $older_codex_version"
if [ "$(cat "$agents/versions" 2>/dev/null)" != "$versions" ]; then
  rm -rf "$agents"
  npm install --prefix "$agents" --no-audit --no-fund --loglevel=error \
    "@anthropic-ai/claude-code@$claude_version" "@openai/codex@$codex_version"
  npm install --prefix "$agents/older" --no-audit --no-fund --loglevel=error \
    "@anthropic-ai/claude-code@$older_claude_version" "@openai/codex@$older_codex_version"
  echo "$versions" > "$agents/versions"
fi

# OpenTelemetry's own OTLP protobuf decoder (the classes
# @opentelemetry/otlp-transformer 0.52 generated from opentelemetry-proto;
# later releases only encode): the OTLP tests read what flightrec sends
# with it (tests/programs/otlp_decode.js), not with flightrec's code.
otel=/opt/flightrec-test-otel otel_version=0.52.1
if [ "$(cat "$otel/version" 2>/dev/null)" != "$otel_version" ]; then
  rm -rf "$otel"
  npm install --prefix "$otel" --no-audit --no-fund --loglevel=error "@opentelemetry/otlp-transformer@$otel_version"
  echo "$otel_version" > "$otel/version"
fi
