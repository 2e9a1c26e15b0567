"""The package's JSON Schemas (tcpadvise/schemas/), with validators that resolve
references between them: a rule file's policies are checked against the
policy config's own definition."""

import functools
import json
from importlib import resources

import jsonschema
from referencing import Registry
from referencing.jsonschema import DRAFT202012

SCHEMA_FILES = {
    "tcpadvise.rules/1": "rules-1.schema.json",
    "tcpadvise.config/1": "config-1.schema.json",
    "tcpadvise.calibration/1": "calibration-1.schema.json",
    "tcpadvise.report/1": "report-1.schema.json",
    "tcpadvise.ab-report/1": "ab-report-1.schema.json",
}


@functools.cache
def schema(schema_id: str) -> dict:
    return json.loads(resources.files(__package__).joinpath("schemas", SCHEMA_FILES[schema_id]).read_text())


@functools.cache
def validator(schema_id: str) -> jsonschema.protocols.Validator:
    registry = Registry().with_resources(
        (other, DRAFT202012.create_resource(schema(other))) for other in SCHEMA_FILES
    )
    return jsonschema.Draft202012Validator(schema(schema_id), registry=registry)


def errors(schema_id: str, document) -> list[jsonschema.ValidationError]:
    """Every error of `document`, each narrowed to its most specific cause."""
    found = []
    for error in validator(schema_id).iter_errors(document):
        # A failed oneOf reports why each branch failed as context: the best match says most.
        while error.context:
            error = jsonschema.exceptions.best_match(error.context)
        found.append(error)
    return found
