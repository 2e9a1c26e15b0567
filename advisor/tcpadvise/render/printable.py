"""printable neutralises what a traced program put in its name and arguments before text shows it.

A program name or argument may hold terminal escape sequences (ESC [ 2 J
clears the screen) or other control characters; printed raw they act on the
reader's terminal. Text output shows them escaped instead (\\x1b), as Python's
repr does; JSON output escapes them itself.
"""

import dataclasses
import unicodedata

from ..model.report import Report
from ..model.streaming import StreamedReport

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


def neutralised(value, seen: dict | None = None):
    """`value` (JSON-like) with printable applied to every string in it, keys included; what holds
    no string to escape is returned as it is, not copied. seen: id -> result of the containers done
    so far, so that one shared many times (a call stack's frames) is walked once."""
    kind = type(value)
    if kind is str:
        return printable(value)
    if kind is not dict and kind is not list and kind is not tuple:
        return value
    seen = {} if seen is None else seen
    done = seen.get(id(value))
    if done is not None:
        return done[1]
    if kind is dict:
        items = [(neutralised(key, seen), neutralised(item, seen)) for key, item in value.items()]
        same = all(new_key is key and new is item for (new_key, new), (key, item) in zip(items, value.items()))
        result = value if same else dict(items)
    else:
        items = [neutralised(item, seen) for item in value]
        result = value if all(new is item for new, item in zip(items, value)) else items
    # The value is kept beside its result: while seen lives, its id is not another's.
    seen[id(value)] = (value, result)
    return result


def neutralised_report(report: "Report | StreamedReport") -> "Report | StreamedReport":
    """`report` with every string text shows from the traces printable: the socket items,
    findings, warnings and policy effects (text reads the traces and raw sockets only for
    counts and figures); of a StreamedReport, the items it shows and its groups."""
    seen: dict = {}
    shown = ("busiest", "groups") if isinstance(report, StreamedReport) else ("sockets",)
    fields = shown + ("findings", "warnings", "policy_effects")
    return dataclasses.replace(report, **{name: neutralised(getattr(report, name), seen) for name in fields})
