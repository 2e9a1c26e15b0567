"""The report as JSON (schema tcpadvise/schemas/report-1.schema.json)."""

import json

from ..model.report import Report


def render_json(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2) + "\n"
