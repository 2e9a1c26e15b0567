#!/usr/bin/env bash
# The demo: the project's own server and client, which talk in bursts of
# fifteen 2-byte writes answered by 2 bytes (the pattern of seed 004), both
# recorded under the shim, then reported.
set -euo pipefail
build=${1:-build}
out=${2:-tcpadvise-out/demo}
burst="$build/programs/burst"
# The demo's own directory: each run starts from an empty one.
rm -rf "$out"

tcpadvise record -o "$out" --interval 1 -- bash -c '
  set -e
  exec 3< <("$1" server --port 0)
  read -r _ port <&3
  "$1" client --port "$port" --rounds 20 --writes 15 --size 2 --reply 2 >/dev/null
  kill -TERM $! 2>/dev/null || true
  wait 2>/dev/null || true
' demo "$burst"
echo
tcpadvise report "$out"
