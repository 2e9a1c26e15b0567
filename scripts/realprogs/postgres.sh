#!/usr/bin/env bash
# Runs a throwaway PostgreSQL cluster in the foreground on 127.0.0.1:PORT:
# initdb into DIR/data, then the postmaster itself (exec), which forks a
# backend per connection. Its Unix socket is in DIR, its log in DIR/log.
# Whoever started this script stops the server with SIGTERM (smart shutdown)
# or SIGINT (fast); an LD_PRELOAD given to the script reaches the postmaster
# and its backends, initdb excepted.
#
# PostgreSQL refuses to run as root: run as root, this script runs initdb
# and the server as the user "postgres" (Debian's package creates it), who
# gets DIR and must be able to write to $TCPADVISE_OUT.
#
# usage: postgres.sh DIR PORT
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 DIR PORT" >&2
  exit 2
fi
mkdir -p "$1"
dir=$(realpath "$1")
port=$2
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -n "$bin" ] || bin=$(dirname "$(command -v postgres || command -v initdb)")

# setpriv execs the program as the user (runuser would stay as its parent and
# turn a SIGTERM into its own exit status).
as_user=()
if [ "$(id -u)" -eq 0 ]; then
  chown postgres: "$dir"
  as_user=(setpriv --reuid postgres --regid postgres --init-groups --)
fi

# initdb is no part of what is measured: it runs without the shim.
env -u LD_PRELOAD "${as_user[@]}" "$bin/initdb" -D "$dir/data" -A trust -U postgres --no-sync >"$dir/initdb.log" 2>&1
exec "${as_user[@]}" "$bin/postgres" -D "$dir/data" -h 127.0.0.1 -p "$port" -k "$dir" \
  -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c logging_collector=off \
  >"$dir/log" 2>&1
