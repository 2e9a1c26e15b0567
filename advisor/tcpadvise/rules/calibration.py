"""Local figures for the findings' expected effects: the calibration file of
`tcpadvise report --calibration FILE`, as `tcpadvise bench` is to write it.

    {"schema": "tcpadvise.calibration/1",
     "host": "free text, optional",
     "measurements": {"nagle": {"plain_us": 41800, "nodelay_us": 65, "cork_us": 20, "writev_us": 19}, ...}}

schemas/calibration-1.schema.json names each measurement, the seed
experiment it reproduces and its fields; a field's unit is its suffix (_us,
_mbit_s, _bytes). A rule's expected_effect.measured names the measurement it
takes its figures from.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from .. import schemas
from ..errors import BadCalibrationError

CALIBRATION_SCHEMA = schemas.uri("tcpadvise.calibration/1")
_UNIT_SUFFIXES = (("_us", "us"), ("_mbit_s", "mbit_s"), ("_bytes", "bytes"))


@dataclass(frozen=True)
class Calibration:
    path: Path
    measurements: dict[str, dict[str, float]]


def load_calibration(path: Path) -> Calibration:
    """Read and validate a calibration file; a bad one is a BadCalibrationError (exit status 2)."""
    try:
        data = json.loads(path.read_bytes())
    except OSError as error:
        raise BadCalibrationError(f"{path}: cannot read the calibration ({error.strerror})") from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise BadCalibrationError(f"{path}: the calibration is not JSON") from None
    problems = schemas.errors(CALIBRATION_SCHEMA, data)
    if problems:
        where = "/".join(str(part) for part in problems[0].absolute_path) or "top level"
        raise BadCalibrationError(f"{path}: invalid {CALIBRATION_SCHEMA} at {where}: {problems[0].message}")
    return Calibration(path, data["measurements"])


def measurement_fields(measurement: str) -> tuple[str, ...] | None:
    """The fields a known measurement always has, or None for a measurement the schema does not define."""
    known = schemas.schema(CALIBRATION_SCHEMA)["properties"]["measurements"]["properties"]
    return tuple(known[measurement]["required"]) if measurement in known else None


def field_unit(field: str) -> str:
    return next((unit for suffix, unit in _UNIT_SUFFIXES if field.endswith(suffix)), "count")
