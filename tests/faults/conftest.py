"""Fixtures of the fault matrix: each case runs without the shim and under
every policy, on the conformance suite's driver and hashing peer."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "conformance"))

from conformlib import baselines, conform  # noqa: E402,F401 (fixtures)
