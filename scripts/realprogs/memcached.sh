#!/usr/bin/env bash
# Runs memcached in the foreground on 127.0.0.1:PORT (TCP only, 64 MB), with
# its output in DIR/memcached.log. The process becomes memcached itself
# (exec), so whoever started this script stops the server with SIGTERM
# (Ctrl-C by hand) and an LD_PRELOAD given to the script reaches the server.
#
# usage: memcached.sh DIR PORT
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 DIR PORT" >&2
  exit 2
fi
mkdir -p "$1"
dir=$(realpath "$1")
port=$2

# memcached refuses to run as root unless told which user to be: stay root,
# so that it can write traces into a private directory.
user=()
if [ "$(id -u)" -eq 0 ]; then
  user=(-u root)
fi

exec memcached "${user[@]}" -l 127.0.0.1 -p "$port" -U 0 -m 64 -t 2 >"$dir/memcached.log" 2>&1
