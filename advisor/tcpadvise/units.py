"""Figures as people read them: bytes, durations, shares, counts.

One place for every unit a report shows, so that the socket table, the
findings and the rule texts write the same value the same way.
"""

# The units a metric or a calibration field can have.
UNITS = ("bytes", "us", "count", "ratio", "fraction", "bool", "text", "mbit_s")
# Units whose values are numbers that can be ordered and compared with thresholds.
NUMERIC_UNITS = frozenset({"bytes", "us", "count", "ratio", "fraction", "mbit_s"})
DASH = "-"
_EXACT_BYTES_BELOW = 64 * 1024


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
    if microseconds < 1:
        return f"{microseconds * 1000:.0f} ns"
    if microseconds < 1000:
        return f"{microseconds:.1f} µs"
    if microseconds < 1_000_000:
        return f"{microseconds / 1000:.1f} ms"
    return f"{microseconds / 1_000_000:.2f} s"


def format_number(value: float | None) -> str:
    if value is None:
        return DASH
    return f"{value:g}" if isinstance(value, float) and not value.is_integer() else f"{int(value)}"
