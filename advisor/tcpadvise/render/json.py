"""The report as JSON (schema tcpadvise/schemas/report-1.schema.json)."""

import json
import math

from ..model.report import Report


def render_json(report: Report) -> str:
    return dumps(report.to_json())


def dumps(document) -> str:
    """`document` as indented JSON; a NaN or infinity (not JSON) becomes null."""
    return json.dumps(finite(document), indent=2, allow_nan=False) + "\n"


def finite(value):
    """`value` with every non-finite float replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value
