"""`tcpadvise bench`: the seed experiments measured on this machine's paths."""

# BENCH_SERVER_PORT: where `tcpadvise bench-server` listens unless told otherwise.
BENCH_SERVER_PORT = 7357
