"""Find, load and validate the shim's traces and the record manifest.

Inputs are files or directories. In a directory every non-hidden *.json file
is read (the shim's temporary files start with '.', so a half-written trace is
never picked up), and every *.spool file: the traces a process tree's fork
children wrote to their parent's spool (trace/spool.py), each committed record
read as a file of its own named <spool>#<pid>. A file is told apart by its
"schema" field: a trace ("tcpadvise.trace/N") or the manifest `tcpadvise
record` writes ("tcpadvise.record/N", named record.json).
"""

import copy
import functools
import gc
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
import jsonschema_rs

from .. import schemas
from ..errors import (
    BadInputError,
    InvalidTraceError,
    MissingPathError,
    NotATraceError,
    NotJsonError,
    NoTracesError,
    UnknownSchemaError,
)
from . import check, represents, spool, stream

TRACE_SCHEMA = "tcpadvise.trace/1"
RECORD_SCHEMA = "tcpadvise.record/1"
RECORD_FILE = "record.json"

# Schema id -> file under tcpadvise/schemas/.
KNOWN_SCHEMAS = {
    TRACE_SCHEMA: "trace-1.schema.json",
    RECORD_SCHEMA: "record-1.schema.json",
}
_INPUT_KINDS = (
    "tcpadvise.trace/",
    "tcpadvise.record/",
    f"{schemas.SCHEMA_BASE}trace/",
    f"{schemas.SCHEMA_BASE}record/",
)
_MESSAGE_LIMIT = 120


@dataclass(frozen=True)
class Trace:
    """One process's trace, validated against its schema."""

    path: Path
    data: dict


@dataclass(frozen=True)
class Manifest:
    """The record.json `tcpadvise record` wrote beside the traces of one run."""

    path: Path
    data: dict


@dataclass
class Inputs:
    """Everything found in the paths given.

    stale holds traces found beside a manifest but written before that run
    started: leftovers of an earlier run into the same directory, kept out of
    traces so they do not mix with the run the manifest describes.
    """

    traces: list[Trace] = field(default_factory=list)
    manifests: list[Manifest] = field(default_factory=list)
    stale: list[Trace] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    damaged: list[Path] = field(default_factory=list)


def load_inputs(paths: Iterable[Path], *, compact: bool = False) -> Inputs:
    """Load and validate every trace and manifest in `paths` (files or directories).

    compact: each trace's "sockets" is a stream.TraceSockets (read again one socket at a time
    whenever it is iterated, see trace/stream.py), not a list: what the report holds of its input
    is then a compressed copy, whatever the traces' size.

    A file found in a directory that is not a tcpadvise document at all (not JSON, or JSON without
    a tcpadvise schema, such as a report saved beside the traces) is skipped with a warning; a
    file named on its own must be one. A damaged trace (a tcpadvise file that is invalid, cut
    short or of an unknown version) among good ones is skipped with a warning naming the file and
    the field, and listed in damaged; when nothing else is left its error is the error.
    """
    paths = list(paths)
    named = {path.resolve() for path in paths if not path.is_dir()}
    documents, warnings, damaged, errors = [], [], [], []
    kept_open = 0
    for path in input_files(paths):
        if spool.is_spool(path):
            try:
                found = _spooled(path, compact, warnings, damaged, errors)
            except NotATraceError:
                if path.resolve() in named:
                    raise
                warnings.append(f"skipped {path}: not a tcpadvise trace spool")
                continue
            except UnknownSchemaError as error:
                errors.append(error)
                damaged.append(path)
                warnings.append(f"skipped {path}: {str(error).removeprefix(f'{path}: ')}")
                continue
            documents.extend(found)
            continue
        try:
            documents.append(load_file(path, compact=compact, keep_open=kept_open < stream.KEEP_OPEN))
            kept_open += isinstance(documents[-1], Trace) and stream.file_kept_open(documents[-1].data)
        except (NotJsonError, NotATraceError) as error:
            if path.resolve() in named:
                raise
            warnings.append(f"skipped {path}: {str(error).removeprefix(f'{path}: ')}")
        except (InvalidTraceError, UnknownSchemaError) as error:
            errors.append(error)
            damaged.append(path)
            warnings.append(f"skipped {path}: {str(error).removeprefix(f'{path}: ')}")
    if not documents:
        if len(errors) == 1:
            raise errors[0]
        raise NoTracesError(f"no trace among the files given ({len(warnings)} skipped: {'; '.join(warnings)})")
    inputs = Inputs(
        manifests=[document for document in documents if isinstance(document, Manifest)],
        warnings=warnings,
        damaged=damaged,
    )
    for trace in (document for document in documents if isinstance(document, Trace)):
        predates_its_run = any(_predates(trace, manifest) for manifest in inputs.manifests)
        (inputs.stale if predates_its_run else inputs.traces).append(trace)
    return inputs


def input_files(paths: Iterable[Path]) -> list[Path]:
    """The JSON files named by `paths`, directories expanded, each file once."""
    paths = list(paths)
    if not paths:
        raise NoTracesError(
            "no trace given: name trace files or a directory of them, e.g. 'tcpadvise report tcpadvise-out'"
        )
    files: dict[Path, Path] = {}
    for path in paths:
        if path.is_dir():
            try:
                found = sorted(
                    entry
                    for entry in path.iterdir()
                    if entry.suffix in (".json", spool.SUFFIX)
                    and not entry.name.startswith(".")
                    and entry.is_file()
                )
            except OSError as error:
                raise BadInputError(f"{path}: cannot read ({error.strerror})") from None
            if not found:
                raise NoTracesError(
                    f"{path}: no traces here (the shim writes <program>.<pid>.json, a forking "
                    f"server's children <program>.<pid>.<nonce>.spool, 'tcpadvise record' adds {RECORD_FILE})"
                )
        elif path.exists():
            found = [path]
        else:
            raise MissingPathError(f"{path}: no such file or directory")
        for file in found:
            files.setdefault(file.resolve(), file)
    return list(files.values())


def load_file(path: Path, *, compact: bool = False, keep_open: bool = False) -> Trace | Manifest:
    """Read one file and validate it against the schema it names; compact: as load_inputs says
    (keep_open: a large trace's file may stay open to be read again, stream.scan)."""
    if compact:
        try:
            large = path.stat().st_size >= stream.WHOLE_BELOW
        except OSError:
            large = False  # read_bytes says why
        try:
            scanned = stream.scan(path, _names_trace, _usable_socket, _usable_header, keep_open) if large else None
        except OSError:
            scanned = None  # read_bytes says why
        if scanned is not None and represents.represented(scanned) == 1:
            return Trace(path, scanned)
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise BadInputError(f"{path}: cannot read ({error.strerror})") from None
    return _document(path, raw, compact)


def _spooled(
    path: Path, compact: bool, warnings: list[str], damaged: list[Path], errors: list
) -> list[Trace]:
    """The traces of the spool at path (NotATraceError, UnknownSchemaError: not one the advisor
    reads); each record is judged as a trace file named <spool>#<pid> is, a damaged one skipped with
    a warning, and what the spool's reader skipped is one more warning."""
    found = spool.read(path)
    if found.problem is not None:
        warnings.append(found.problem)
        damaged.append(path)
    parsed = []
    names = set()
    for record in found.records:
        name = Path(f"{path}#{record.pid}")
        if name in names:  # a pid the kernel gave out again within one spool
            name = Path(f"{path}#{record.pid}@{record.offset}")
        names.add(name)
        try:
            document = _document(name, record.data, compact=False, stand_for=False)
            if not isinstance(document, Trace):
                raise NotATraceError(f"{name}: not a tcpadvise trace (a record manifest in a spool)")
        except (NotJsonError, NotATraceError, InvalidTraceError, UnknownSchemaError) as error:
            errors.append(error)
            damaged.append(name)
            warnings.append(f"skipped {name}: {str(error).removeprefix(f'{name}: ')}")
            continue
        parsed.append((document, record.data))
    # The last children of a service that wrote no trace, fewer than its EVERY (their sampled sibling
    # never came, or died before its trace was written), are stood for by the last trace of their
    # service that was written.
    unrepresented = dict(found.unrepresented)
    for document, _ in reversed(parsed):
        key = spool.sample_key(document.data)
        if unrepresented.get(key):
            document.data["represents"] = represents.represented(document.data) + unrepresented.pop(key)
    if unrepresented:
        warnings.append(
            f"{path}: {sum(unrepresented.values())} fork child(ren) of one connection are not counted: they "
            "wrote no trace, and no trace of their service was written to stand for them"
        )
    return [_standing_for(document, raw, compact) for document, raw in parsed]


def _standing_for(trace: Trace, raw: bytes, compact: bool) -> Trace:
    """A trace as the fork children it represents (represents.stand_for: a sampled child's, in a
    spool, or in a file when the spool had no room), compacted if asked (from its scaled form when it
    represents several)."""
    data = represents.stand_for(trace.data)
    if data is not trace.data:
        raw = json.dumps(data, separators=(",", ":")).encode()
    return Trace(trace.path, stream.compact(data, raw) if compact else data)


def _document(path: Path, raw: bytes, compact: bool, stand_for: bool = True) -> Trace | Manifest:
    """The document in raw, read from path, validated against the schema it names; a trace that
    represents several fork children as them (_standing_for) unless stand_for is False (then read
    whole, as it is written)."""
    try:
        data = _parsed(raw)
    except UnicodeDecodeError:
        raise NotJsonError(f"{path}: not JSON (not UTF-8 text)") from None
    except json.JSONDecodeError as error:
        raise NotJsonError(f"{path}: not JSON ({error.msg} at line {error.lineno})") from None
    except _ConstantError as error:
        raise NotJsonError(f"{path}: not JSON ({error} is not a JSON number)") from None
    except RecursionError:
        raise NotJsonError(f"{path}: not JSON (nested too deep)") from None
    schema_id = data.get("schema") if isinstance(data, dict) else None
    if not isinstance(schema_id, str) or not schema_id.startswith(_INPUT_KINDS):
        raise NotATraceError(
            f'{path}: not a tcpadvise trace (expected a JSON object with "schema": "{TRACE_SCHEMA}")'
        )
    if schemas.old_name(schema_id) not in KNOWN_SCHEMAS:
        raise UnknownSchemaError(
            f"{path}: unknown schema version '{schema_id}'; this tcpadvise knows {', '.join(KNOWN_SCHEMAS)}"
        )
    if not _valid(schema_id, data):
        try:
            error = jsonschema.exceptions.best_match(schemas.validator(schema_id).iter_errors(data))
        except RecursionError:
            raise InvalidTraceError(f"{path}: invalid {schema_id}: nested too deep") from None
        if error is not None:
            where = "/".join(str(part) for part in error.absolute_path) or "top level"
            raise InvalidTraceError(f"{path}: invalid {schema_id} at {where}: {_shorten(error.message)}")
    unusable = check.problem(data)
    if unusable is not None:
        raise InvalidTraceError(f"{path}: invalid {schema_id} at {unusable[0]}: {unusable[1]}")
    if schemas.old_name(schema_id) == RECORD_SCHEMA:
        return Manifest(path, data)
    return Trace(path, data) if not stand_for else _standing_for(Trace(path, data), raw, compact)


def _names_trace(schema_id) -> bool:
    return isinstance(schema_id, str) and schemas.old_name(schema_id) == TRACE_SCHEMA


def _usable_socket(socket) -> bool:
    """Whether one socket of a trace is valid (the schema's socket definition) and usable (check).

    Most are proven both by _strict_socket_validator alone (a socket in 20 us, where check takes
    about 100); what it refuses is judged by the schema and check."""
    try:
        if _strict_socket_validator().is_valid(socket):
            return True
        valid = _fast_validator(_SOCKET_SCHEMA).is_valid(socket)
    except (ValueError, OverflowError, TypeError):
        return False
    return valid and check.problem(socket) is None


# _I64_MIN, _U64_MAX: integer bounds jsonschema-rs takes, within check's (-2**64, 2**64).
_I64_MIN, _U64_MAX = -(1 << 63), (1 << 64) - 1
# _NUMBER_BOUND: the strict schema's bound on a number (integer or float), within check's: 2**63,
# exact as a float too, and an integer, which jsonschema-rs compares several times faster than a
# float bound (the strict check of the 100 MB trace's sockets took 1.1 s with 2.0**64, 0.65 s with it).
_NUMBER_BOUND = 1 << 63
# _SHIM_SUB_BUCKETS: the shim's buckets per power of two; the strict schema knows only these.
_SHIM_SUB_BUCKETS = 128


@functools.cache
def _strict_socket_validator() -> jsonschema_rs.Validator:
    """The trace schema's socket definition made strict enough that what it accepts, check.problem
    accepts too: every integer within 64 bits (a "number" within +-2**63), no property the schema
    does not name (where check would have to look), histograms in the shim's indexed encoding (128
    sub-buckets, [index, count] rows, index below the bucket of 2**64), tcp_info samples at least 1.
    Stricter than the schema, never looser: a socket it refuses is judged by the schema and check."""
    trace = copy.deepcopy(schemas.schema(schemas.uri(TRACE_SCHEMA)))

    def strict(node):
        if isinstance(node, list):
            for item in node:
                strict(item)
            return
        if not isinstance(node, dict):
            return
        types = node.get("type")
        types = [types] if isinstance(types, str) else types or []
        if "number" in types:
            node["minimum"] = max(node.get("minimum", -_NUMBER_BOUND), -_NUMBER_BOUND)
            node["maximum"] = min(node.get("maximum", _NUMBER_BOUND), _NUMBER_BOUND)
        elif "integer" in types:  # integer bounds: compared as integers, far faster than with a float
            node.setdefault("minimum", _I64_MIN)
            node["maximum"] = _U64_MAX
        if "object" in types and "additionalProperties" not in node and "patternProperties" not in node:
            node["additionalProperties"] = False
        for key, value in node.items():
            if key not in ("enum", "const", "default", "examples"):
                strict(value)

    strict(trace)
    histogram = trace["$defs"]["histogram"]
    top = 66 * _SHIM_SUB_BUCKETS
    histogram["required"] = [*histogram["required"], "scale", "sub_buckets"]
    histogram["properties"]["sub_buckets"] = {"const": _SHIM_SUB_BUCKETS}
    histogram["properties"]["scale"] = {"type": "number", "exclusiveMinimum": 0, "maximum": _NUMBER_BOUND}
    histogram["properties"]["buckets"] = {"type": "array", "items": {
        "type": "array", "minItems": 2, "maxItems": 2, "prefixItems": [
            {"type": "integer", "minimum": 0, "maximum": top - 1},
            {"type": "integer", "minimum": _I64_MIN, "maximum": _U64_MAX}]}}
    trace["$defs"]["socket"]["properties"]["tcp_info"]["properties"]["samples"]["minimum"] = 1
    return jsonschema_rs.validator_for({"$schema": trace["$schema"], "$defs": trace["$defs"], "$ref": "#/$defs/socket"})


def _usable_header(header: dict) -> bool:
    """Whether a trace less its sockets is valid and usable."""
    return _valid(TRACE_SCHEMA, header) and check.problem(header) is None


def _parsed(raw: bytes):
    """The JSON document in raw, parsed with Python's cyclic garbage collector paused: a trace holds
    no cycles, and the collector walking millions of new containers again and again took 5 of the
    6 s a 100 MB trace took to parse."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return json.loads(raw, parse_constant=_refuse_constant)
    finally:
        if collecting:
            gc.enable()


class _ConstantError(ValueError):
    """NaN, Infinity or -Infinity: Python's json reads them, JSON has no such numbers."""


def _refuse_constant(name: str):
    raise _ConstantError(name)


def _valid(schema_id: str, data) -> bool:
    """Whether data is valid, by jsonschema-rs: a 100 MB trace in under a second, where jsonschema's
    own validator takes minutes. False sends it to jsonschema, whose best_match names the error."""
    try:
        return _fast_validator(schemas.uri(schema_id)).is_valid(data)
    except (ValueError, OverflowError, TypeError):
        return False  # what jsonschema-rs cannot take (an integer past 64 bits): jsonschema decides


# _SOCKET_SCHEMA: a key of _fast_validator for one socket of a trace (the trace schema's $defs/socket).
_SOCKET_SCHEMA = "#socket"


@functools.cache
def _fast_validator(schema_uri: str) -> jsonschema_rs.Validator:
    if schema_uri == _SOCKET_SCHEMA:
        trace = schemas.schema(schemas.uri(TRACE_SCHEMA))
        return jsonschema_rs.validator_for({"$schema": trace["$schema"], "$defs": trace["$defs"],
                                            "$ref": "#/$defs/socket"})
    return jsonschema_rs.validator_for(schemas.schema(schema_uri))


def _predates(trace: Trace, manifest: Manifest) -> bool:
    return (
        trace.path.resolve().parent == manifest.path.resolve().parent
        and trace.data["written_unix_ns"] < manifest.data["started_unix_ns"]
    )


def _shorten(message: str) -> str:
    return message if len(message) <= _MESSAGE_LIMIT else message[: _MESSAGE_LIMIT - 3] + "..."
