#!/bin/bash
# Installs what flightrec needs to build and test on Debian 12 (as root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends \
  cmake make g++ pkg-config ccache \
  clang llvm libbpf-dev bpftool \
  libsqlite3-dev libssl-dev libboost-program-options-dev nlohmann-json3-dev doctest-dev \
  util-linux coreutils procps \
  python3 python3-cryptography openssl curl
