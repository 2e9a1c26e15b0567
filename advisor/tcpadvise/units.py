"""Figures as people read them: bytes, durations, shares, counts.

One place for every unit a report shows, so that the socket table, the
findings, the rule texts and the bench tables write the same value the same way.
"""

import math
from collections.abc import Callable

# The units a metric or a calibration field can have.
UNITS = ("bytes", "us", "count", "ratio", "fraction", "bool", "text", "mbit_s")
# Units whose values are numbers that can be ordered and compared with thresholds.
NUMERIC_UNITS = frozenset({"bytes", "us", "count", "ratio", "fraction", "mbit_s"})
DASH = "-"
_EXACT_BYTES_BELOW = 64 * 1024
# (below this many µs, unit, decimals, microseconds in that unit)
_DURATION_UNITS = (
    (1, "ns", 0, lambda microseconds: microseconds * 1000),
    (1000, "µs", 1, lambda microseconds: microseconds),
    (1_000_000, "ms", 1, lambda microseconds: microseconds / 1000),
    (math.inf, "s", 2, lambda microseconds: microseconds / 1_000_000),
)


def format_value(value, unit: str) -> str:
    """`value` in `unit`, short: '1.4 KiB', '41.6 ms', '37%', 'on'; '-' for None."""
    if value is None:
        return DASH
    if unit == "bytes":
        # Exact up to 64 KiB: segment and message sizes differ by a few bytes where it matters.
        return f"{value:.0f} B" if value < _EXACT_BYTES_BELOW else format_bytes(value)
    if unit == "us":
        return format_duration_us(value)
    if unit == "fraction":
        return f"{value * 100:.0f}%" if value >= 0.01 or value == 0 else f"{value * 100:.2g}%"
    if unit == "bool":
        return "on" if value else "off"
    if unit == "ratio":
        return f"{value:.3g}"
    if unit == "mbit_s":
        return f"{value:g} Mbit/s"
    if unit == "count":
        return format_number(value)
    return str(value)


def format_bytes(count: float | None) -> str:
    if count is None:
        return DASH
    value, unit = float(count), "B"
    for larger in ("KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024:
            break
        value, unit = value / 1024, larger
    return f"{value:.0f} B" if unit == "B" else f"{value:.1f} {unit}"


def format_duration_us(microseconds: float | None) -> str:
    if microseconds is None:
        return DASH
    unit, decimals, convert = _duration_unit(microseconds)
    return f"{convert(microseconds):.{decimals}f} {unit}"


def duration_unit(microseconds: float) -> tuple[str, Callable[[float], float]]:
    """The unit format_duration_us writes `microseconds` in, and how to convert microseconds to it."""
    unit, _, convert = _duration_unit(microseconds)
    return unit, convert


def _duration_unit(microseconds: float) -> tuple[str, int, Callable[[float], float]]:
    return next((unit, decimals, convert) for below, unit, decimals, convert in _DURATION_UNITS if microseconds < below)


def format_number(value: float | None) -> str:
    if value is None:
        return DASH
    return f"{value:g}" if isinstance(value, float) and not value.is_integer() else f"{int(value)}"


def ns_to_us(nanoseconds: float | None) -> float | None:
    """Nanoseconds as microseconds to the nanosecond, as the JSON documents give times; None stays None."""
    return None if nanoseconds is None else round(float(nanoseconds) / 1000, 3)


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator, or None when either is unknown or the denominator is 0."""
    return None if numerator is None or not denominator else numerator / denominator
