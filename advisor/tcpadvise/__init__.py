"""tcpadvise: record how unmodified programs use TCP (through an LD_PRELOAD shim) and report on it."""
