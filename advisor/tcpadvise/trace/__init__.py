"""Reading traces: the shim's files, checked against their schema, grouped by host."""

# UNKNOWN_HOST: the host of a trace written before the shim recorded one.
UNKNOWN_HOST = "unknown"
