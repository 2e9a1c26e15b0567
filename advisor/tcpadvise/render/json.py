"""The report as JSON (schema tcpadvise/schemas/report-1.schema.json).

orjson writes it: the standard library's encoder is pure Python once it
indents, minutes for the report of a 100 MB trace (bench/report_scale.py).
"""

import orjson

from ..model.report import Report

_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE


def render_json(report: Report) -> bytes:
    return dumps(report.to_json())


def dumps(document) -> bytes:
    """`document` as indented UTF-8 JSON; a NaN or infinity (not JSON) becomes null."""
    return orjson.dumps(document, option=_OPTIONS)
