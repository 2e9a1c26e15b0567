#!/usr/bin/env bash
# Installs what tcpadvise needs to build and test, and only what is missing:
# Debian packages with apt-get (root), then the Python package in editable
# mode with its test extra. Safe to run again.
set -euo pipefail

packages=(
  cmake ninja-build g++ make binutils
  libjemalloc-dev      # the shim's private heap (libjemalloc_pic.a)
  libyaml-cpp-dev      # the policy config parser
  libgtest-dev libgmock-dev
  libbenchmark-dev     # bench/
  libunwind-dev        # call sites: the shim's local unwinder (static, hidden)
  iproute2 util-linux  # ip, taskset
  strace               # tests/realprogs/test_adaptive.py: setsockopt calls per request
  pkgconf groff-base man-db  # tests/install: pkg-config, the man pages read with groff and man
  python3 python3-pip
  redis-server redis-tools nginx curl wrk  # tests/realprogs: real servers and clients
  memcached libmemcached-tools iperf3 postgresql  # tests/realprogs, tests/e2e: real servers and clients
  chromium             # the HTML reports opened in a real browser (tests/browserlib.py, through Playwright)
  prometheus           # tests/advisor/test_openmetrics.py: a real Prometheus scrapes serve-metrics; promtool
)
# tests/faults/test_node.py: Node.js's http server and client (libuv closes
# sockets with syscall(SYS_close)); Debian's nodejs, unless a node is there.
command -v node >/dev/null || packages+=(nodejs)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: need root to install Debian packages: ${missing[*]}" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -e "$(dirname "$0")/../advisor[test]"
