"""A/B experiments: per-connection arms drawn by the shim, compared from their traces.

Constants the CLI's options need live here so that `tcpadvise --help` does
not import the statistics (scipy) behind them.
"""

# MAX_SEED: the largest seed of the shim's per-connection draws (a signed 64-bit integer).
MAX_SEED = 2**63 - 1
