"""Figures as people read them: bytes, durations, shares, counts.

One place for every unit a report shows, so that the socket table, the
findings, the rule texts and the bench tables write the same value the same way.
"""

import math
from collections.abc import Callable

# The units a metric or a calibration field can have.
UNITS = ("bytes", "us", "count", "ratio", "fraction", "bool", "text", "mbit_s", "seconds", "bytes_per_s")
# Units whose values are numbers that can be ordered and compared with thresholds.
NUMERIC_UNITS = frozenset({"bytes", "us", "count", "ratio", "fraction", "mbit_s", "seconds", "bytes_per_s"})
# Significant digits a number shows in text (never in scientific notation).
_SIGNIFICANT = 3
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
        return f"{value * 100:.0f}%" if value >= 0.01 or value == 0 else f"{_plain(value * 100, 2)}%"
    if unit == "bool":
        return "on" if value else "off"
    if unit == "ratio":
        return _plain(value)
    if unit == "mbit_s":
        return f"{_plain(value)} Mbit/s"
    if unit == "bytes_per_s":
        return f"{format_bytes(value)}/s"
    if unit == "seconds":
        return format_duration_us(value * 1_000_000)
    if unit == "count":
        return format_number(value)
    return str(value)


def _plain(value: float, significant: int = _SIGNIFICANT) -> str:
    """`value` to `significant` digits in positional notation: 0.000123, 3110000, never 3.11e+06."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(0, significant - 1 - math.floor(math.log10(abs(value))))
    rounded = round(value, decimals)
    if decimals == 0:
        return f"{rounded:.0f}"
    return f"{rounded:.{decimals}f}".rstrip("0").rstrip(".")


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
    if isinstance(value, float) and not value.is_integer():
        # Large counts in full (3114270, not 3.11427e+06); small fractional ones to 3 digits.
        return f"{value:.0f}" if abs(value) >= 10**_SIGNIFICANT else _plain(value)
    return f"{int(value)}"


def ns_to_us(nanoseconds: float | None) -> float | None:
    """Nanoseconds as microseconds to the nanosecond, as the JSON documents give times; None stays None."""
    return None if nanoseconds is None else round(float(nanoseconds) / 1000, 3)


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator, or None when either is unknown or the denominator is 0."""
    return None if numerator is None or not denominator else numerator / denominator
