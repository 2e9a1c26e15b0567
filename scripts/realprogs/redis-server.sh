#!/usr/bin/env bash
# Runs redis-server in the foreground on 127.0.0.1:PORT, without persistence,
# with everything it writes (config, pid file, log) in DIR. The process
# becomes redis-server itself (exec), so whoever started this script stops the
# server with SIGTERM (Ctrl-C by hand) and an LD_PRELOAD given to the script
# reaches the server.
#
# usage: redis-server.sh DIR PORT
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 DIR PORT" >&2
  exit 2
fi
mkdir -p "$1"
dir=$(realpath "$1")
port=$2

cat >"$dir/redis.conf" <<CONF
bind 127.0.0.1
port $port
daemonize no
dir $dir
pidfile $dir/redis.pid
logfile $dir/redis.log
save ""
appendonly no
CONF

exec redis-server "$dir/redis.conf"
