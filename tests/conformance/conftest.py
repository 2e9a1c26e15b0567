"""Fixtures of the conformance suite: every test runs once per mode
(without the shim, and under each policy)."""
from conformlib import SEED, baselines, conform  # noqa: F401 (fixtures)


def pytest_report_header(config):
    return f"conformance seed: {SEED} (CONFORM_SEED={SEED} repeats this run)"
