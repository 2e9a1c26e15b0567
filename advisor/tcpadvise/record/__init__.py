"""`tcpadvise record`: runs a program under the shim and collects its traces."""

from pathlib import Path

# DEFAULT_OUT_DIR, DEFAULT_INTERVAL: record's defaults, here so that --help shows them without importing the recorder.
DEFAULT_OUT_DIR = Path("tcpadvise-out")
DEFAULT_INTERVAL = 5.0
