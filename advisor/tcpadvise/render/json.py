"""The report as JSON (schema tcpadvise/schemas/report-1.schema.json).

orjson writes it: the standard library's encoder is pure Python once it
indents, minutes for the report of a 100 MB trace (bench/report_scale.py).
JsonReportWriter writes the same bytes a piece at a time: the socket items as
the report reads them, the rest once it is done.
"""

from typing import BinaryIO

import orjson

from ..model.report import REPORT_SCHEMA, Report

_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE
_INDENT = b"  "


def render_json(report: Report) -> bytes:
    return dumps(report.to_json())


def dumps(document) -> bytes:
    """`document` as indented UTF-8 JSON; a NaN or infinity (not JSON) becomes null."""
    return orjson.dumps(document, option=_OPTIONS)


def _nested(value, level: int) -> bytes:
    """`value` as dumps writes it `level` objects or lists deep: dumped inside `level` lists, where
    orjson indents it so, and cut out of them (its newlines are not each replaced: about 0.3 s
    for the 400 MB report of a 100 MB trace)."""
    for _ in range(level):
        value = [value]
    text = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    # Each list opens with "[\n" and the indent of the next level, and closes with "\n", its own, "]".
    return text[level * (level + 3):len(text) - level * (level + 1)] if level else text


class JsonReportWriter:
    """One report document (Report.to_json's keys and order) written to `out` as it is made: begin()
    with the leading keys, item() per socket item, end() with the findings, warnings and policy
    effects. `level`: how deep the document is (1 in --by-host's list); the bytes are those dumps
    gives for the whole document there."""

    def __init__(self, out: BinaryIO, level: int = 0):
        self._out = out
        self._level = level
        self._items = 0

    def begin(self, traces: list[str], host: str | None = None) -> None:
        head = {"host": host} if host is not None else {}
        head |= {"schema": REPORT_SCHEMA, "traces": traces}
        parts = [b"{"]
        for key, value in head.items():
            parts.append(self._key(key) + _nested(value, self._level + 1) + b",")
        parts.append(self._key("sockets"))
        self._out.write(b"".join(parts))

    def item(self, item: dict) -> None:
        lead = b"[\n" if not self._items else b",\n"
        self._items += 1
        self._out.write(lead + _INDENT * (self._level + 2) + _nested(item, self._level + 2))

    def end(self, findings: list[dict], warnings: list[str], policy_effects: list[dict]) -> None:
        parts = [b"\n" + _INDENT * (self._level + 1) + b"]" if self._items else b"[]"]
        for key, value in (("findings", findings), ("warnings", warnings), ("policy_effects", policy_effects)):
            parts.append(b"," + self._key(key) + _nested(value, self._level + 1))
        parts.append(b"\n" + _INDENT * self._level + b"}")
        self._out.write(b"".join(parts))

    def _key(self, key: str) -> bytes:
        return b"\n" + _INDENT * (self._level + 1) + orjson.dumps(key) + b": "
