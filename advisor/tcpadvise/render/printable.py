"""printable neutralises what a traced program put in its name and arguments before text shows it.

A program name or argument may hold terminal escape sequences (ESC [ 2 J
clears the screen) or other control characters; printed raw they act on the
reader's terminal. Text output shows them escaped instead (\\x1b), as Python's
repr does; JSON output escapes them itself.
"""

import dataclasses
import unicodedata

from ..model.report import Report
from ..trace.reader import Trace

# _FORMAT_KEPT: format characters that are part of ordinary text (joiners in emoji and scripts).
_FORMAT_KEPT = {"\u200c", "\u200d"}


def printable(text: str) -> str:
    """`text` with every control character (C0, DEL, C1) and bidi/format character escaped."""
    return "".join(_escaped(char) for char in text)


def _escaped(char: str) -> str:
    category = unicodedata.category(char)
    if category == "Cc" or (category == "Cf" and char not in _FORMAT_KEPT):
        code = ord(char)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return char


def neutralised(value):
    """`value` (JSON-like) with printable applied to every string in it, keys included."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {neutralised(key): neutralised(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [neutralised(item) for item in value]
    return value


def neutralised_report(report: Report) -> Report:
    """A copy of `report` whose every string from the traces is printable."""
    return dataclasses.replace(
        report,
        traces=[Trace(trace.path, neutralised(trace.data)) for trace in report.traces],
        sockets=neutralised(report.sockets),
        raw_sockets=neutralised(report.raw_sockets),
        findings=neutralised(report.findings),
        warnings=neutralised(report.warnings),
    )
