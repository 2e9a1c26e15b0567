#!/bin/bash
# redis_policies: redis-server GET throughput (redis-benchmark -n 20000 -c 4) under
# no shim, observe, adaptive cork and fixed cork, interleaved, 5 repetitions.
# Usage: bench/redis_policies.sh [BUILD_DIR]   (prints one "arm GET: rps" line per run)
B=$(realpath "${1:-build}")/preload/libtcpadvise.so
D=$(mktemp -d)
printf 'version: 1\nrules:\n  - policy: cork\n' > $D/a.yaml
printf 'version: 1\nrules:\n  - policy: {cork: {adaptive: false}}\n' > $D/f.yaml
printf 'version: 1\nrules:\n  - policy: observe\n' > $D/o.yaml
mkdir -p $D/t
run() { # name env...
  local port=$((20000 + RANDOM % 20000))
  env "${@:2}" redis-server --bind 127.0.0.1 --port $port --save "" --appendonly no --dir $D >/dev/null 2>&1 &
  local pid=$!
  for i in $(seq 50); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.05; done
  local r=$(redis-benchmark -p $port -q -n 20000 -c 4 -t get 2>/dev/null | tr '\r' '\n' | grep -o 'GET: [0-9.]*' | tail -1)
  redis-cli -p $port shutdown nosave >/dev/null 2>&1; wait $pid
  echo "$1 $r"
}
for rep in 1 2 3 4 5; do
  run baseline
  run observe LD_PRELOAD=$B TCPADVISE_OUT=$D/t TCPADVISE_CONFIG=$D/o.yaml
  run adaptive LD_PRELOAD=$B TCPADVISE_OUT=$D/t TCPADVISE_CONFIG=$D/a.yaml
  run fixed LD_PRELOAD=$B TCPADVISE_OUT=$D/t TCPADVISE_CONFIG=$D/f.yaml
done
