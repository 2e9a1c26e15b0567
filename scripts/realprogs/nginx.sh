#!/usr/bin/env bash
# Runs nginx in the foreground (daemon off, a master and two workers) on
# 127.0.0.1:PORT serving DOCROOT, with everything it writes (config, pid file,
# logs, temp files) in DIR. The process becomes the nginx master (exec), so
# whoever started this script stops the server with SIGTERM (Ctrl-C by hand)
# and an LD_PRELOAD given to the script reaches the master and its workers.
#
# usage: nginx.sh DIR PORT DOCROOT [--sendfile on|off]
set -euo pipefail

usage() {
  echo "usage: $0 DIR PORT DOCROOT [--sendfile on|off]" >&2
  exit 2
}
[ $# -ge 3 ] || usage
mkdir -p "$1"
dir=$(realpath "$1")
port=$2
docroot=$(realpath "$3")
shift 3
sendfile=on
while [ $# -gt 0 ]; do
  case "$1" in
    --sendfile) [ $# -ge 2 ] || usage; sendfile=$2; shift 2 ;;
    *) usage ;;
  esac
done

# Run as root, nginx would switch its workers to "nobody", who can neither
# read a private DOCROOT nor write traces into a private directory: keep them
# as the user who started the script.
user=""
if [ "$(id -u)" -eq 0 ]; then
  user="user $(id -un) $(id -gn);"
fi

cat >"$dir/nginx.conf" <<CONF
$user
worker_processes 2;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log notice;
events {
  worker_connections 256;
}
http {
  access_log $dir/access.log;
  client_body_temp_path $dir/client_body_temp;
  proxy_temp_path $dir/proxy_temp;
  fastcgi_temp_path $dir/fastcgi_temp;
  uwsgi_temp_path $dir/uwsgi_temp;
  scgi_temp_path $dir/scgi_temp;
  default_type application/octet-stream;
  sendfile $sendfile;
  server {
    listen 127.0.0.1:$port;
    root $docroot;
  }
}
CONF

# -e: the error log nginx uses before it has read the config is DIR's too.
# Debian installs nginx in /usr/sbin, which a user's PATH may lack.
PATH=$PATH:/usr/sbin exec nginx -e "$dir/error.log" -p "$dir" -c "$dir/nginx.conf"
