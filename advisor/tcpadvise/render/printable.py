"""printable neutralises what a traced program put in its name and arguments before text shows it.

A program name or argument may hold terminal escape sequences (ESC [ 2 J
clears the screen) or other control characters; printed raw they act on the
reader's terminal. Text output shows them escaped instead (\\x1b), as Python's
repr does; JSON output escapes them itself.
"""

import dataclasses
import unicodedata

from ..model.report import Report

# _FORMAT_KEPT: format characters that are part of ordinary text (joiners in emoji and scripts).
_FORMAT_KEPT = {"\u200c", "\u200d"}


def printable(text: str) -> str:
    """`text` with every control character (C0, DEL, C1) and bidi/format character escaped."""
    # isprintable() is false for each of those (and for some that are kept, such as a no-break
    # space): most text is returned as it is after one pass in C.
    if text.isprintable():
        return text
    return "".join(_escaped(char) for char in text)


def _escaped(char: str) -> str:
    category = unicodedata.category(char)
    if category == "Cc" or (category == "Cf" and char not in _FORMAT_KEPT):
        code = ord(char)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return char


def neutralised(value):
    """`value` (JSON-like) with printable applied to every string in it, keys included; what holds
    no string to escape is returned as it is, not copied."""
    kind = type(value)
    if kind is str:
        return printable(value)
    if kind is dict:
        items = [(neutralised(key), neutralised(item)) for key, item in value.items()]
        if all(new_key is key and new is item for (new_key, new), (key, item) in zip(items, value.items())):
            return value
        return dict(items)
    if kind is list or kind is tuple:
        items = [neutralised(item) for item in value]
        return value if all(new is item for new, item in zip(items, value)) else items
    return value


def neutralised_report(report: Report) -> Report:
    """`report` with every string text shows from the traces printable: the socket items,
    findings, warnings and policy effects (text reads the traces and raw sockets only for
    counts and figures)."""
    return dataclasses.replace(
        report,
        sockets=neutralised(report.sockets),
        findings=neutralised(report.findings),
        warnings=neutralised(report.warnings),
        policy_effects=neutralised(report.policy_effects),
    )
