"""The package's JSON Schemas (tcpadvise/schemas/), in one registry of the `referencing` library.

Each schema's "$id" is an absolute URI (SCHEMA_BASE + "kind/version") and the
documents it describes name that URI in their "schema" field; documents of
earlier releases name "tcpadvise.kind/version", which every reader accepts as
the same schema. REGISTRY resolves every URI (and the references between the
schemas: a rule file's policies are checked against the policy config's own
definition) offline, so plain jsonschema validates a document:

    jsonschema.validate(document, REGISTRY.contents(uri), registry=REGISTRY)
"""

import functools
import json
from importlib import resources

import jsonschema
from referencing import Registry
from referencing.jsonschema import DRAFT202012

SCHEMA_BASE = "https://tcpadvise.dev/schemas/"
# Old name -> file under tcpadvise/schemas/; each file's $id is uri(old name).
SCHEMA_FILES = {
    "tcpadvise.trace/1": "trace-1.schema.json",
    "tcpadvise.record/1": "record-1.schema.json",
    "tcpadvise.rules/1": "rules-1.schema.json",
    "tcpadvise.config/1": "config-1.schema.json",
    "tcpadvise.calibration/1": "calibration-1.schema.json",
    "tcpadvise.report/1": "report-1.schema.json",
    "tcpadvise.ab-report/1": "ab-report-1.schema.json",
    "tcpadvise.diff/1": "diff-1.schema.json",
    "tcpadvise.bench/1": "bench-1.schema.json",
}


def uri(schema_id: str) -> str:
    """The absolute $id of a schema named either way ("tcpadvise.report/1" or its URI)."""
    return SCHEMA_BASE + schema_id.removeprefix("tcpadvise.") if schema_id.startswith("tcpadvise.") else schema_id


def old_name(schema_id: str) -> str:
    """"tcpadvise.kind/N" for a schema named either way."""
    return "tcpadvise." + schema_id.removeprefix(SCHEMA_BASE) if schema_id.startswith(SCHEMA_BASE) else schema_id


def known(schema_id: str) -> bool:
    return old_name(schema_id) in SCHEMA_FILES


def _load(file: str) -> dict:
    return json.loads(resources.files(__package__).joinpath("schemas", file).read_text())


REGISTRY: Registry = Registry().with_resources(
    (uri(name), DRAFT202012.create_resource(_load(file))) for name, file in SCHEMA_FILES.items()
).crawl()


def schema(schema_id: str) -> dict:
    return REGISTRY.contents(uri(schema_id))


@functools.cache
def validator(schema_id: str) -> jsonschema.protocols.Validator:
    return jsonschema.Draft202012Validator(schema(schema_id), registry=REGISTRY)


def errors(schema_id: str, document) -> list[jsonschema.ValidationError]:
    """Every error of `document`, each narrowed to its most specific cause."""
    found = []
    for error in validator(schema_id).iter_errors(document):
        # A failed oneOf reports why each branch failed as context: the best match says most.
        while error.context:
            error = jsonschema.exceptions.best_match(error.context)
        found.append(error)
    return found
