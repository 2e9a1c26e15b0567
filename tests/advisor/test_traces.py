import json

import pytest
from tcpadvise import schemas
from tcpadvise.errors import (
    BadInputError,
    InvalidTraceError,
    MissingPathError,
    NotATraceError,
    NotJsonError,
    NoTracesError,
    UnknownSchemaError,
)
from tcpadvise.trace import reader
from tcpadvise.trace.reader import Manifest, Trace, load_file, load_inputs

from .conftest import make_manifest, make_socket, make_trace, write_json, write_trace


def test_loads_a_trace_file(tmp_path):
    path = write_trace(tmp_path, make_trace())
    loaded = load_file(path)
    assert isinstance(loaded, Trace)
    assert loaded.data["program"] == "client"


def test_directory_gives_visible_json_files_and_recognises_the_manifest(tmp_path):
    write_trace(tmp_path, make_trace(pid=1))
    write_trace(tmp_path, make_trace(pid=2))
    write_json(tmp_path / "record.json", make_manifest())
    (tmp_path / ".client.3.json.tmp").write_text("{half a")
    (tmp_path / ".client.3.json").write_text("{half a")
    (tmp_path / "notes.txt").write_text("not a trace")
    inputs = load_inputs([tmp_path])
    assert [trace.data["pid"] for trace in inputs.traces] == [1, 2]
    assert len(inputs.manifests) == 1
    assert isinstance(inputs.manifests[0], Manifest)


def test_a_file_named_twice_is_read_once(tmp_path):
    path = write_trace(tmp_path, make_trace())
    assert len(load_inputs([path, tmp_path, path]).traces) == 1


def test_traces_older_than_the_manifest_run_are_set_aside(tmp_path):
    write_trace(tmp_path, make_trace(pid=1, written_unix_ns=100))
    write_trace(tmp_path, make_trace(pid=2, written_unix_ns=5_000))
    write_json(tmp_path / "record.json", make_manifest(started_unix_ns=1_000))
    inputs = load_inputs([tmp_path])
    assert [trace.data["pid"] for trace in inputs.traces] == [2]
    assert [trace.data["pid"] for trace in inputs.stale] == [1]


def test_no_path_at_all(tmp_path):
    with pytest.raises(NoTracesError, match="no trace given"):
        load_inputs([])


def test_missing_path(tmp_path):
    with pytest.raises(MissingPathError, match="no such file"):
        load_inputs([tmp_path / "nope.json"])


def test_directory_without_traces(tmp_path):
    (tmp_path / "readme.txt").write_text("hello")
    with pytest.raises(NoTracesError, match="no traces here"):
        load_inputs([tmp_path])


def test_not_json(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"schema": ')
    with pytest.raises(NotJsonError, match="not JSON"):
        load_file(path)


def test_binary_garbage_is_not_json(tmp_path):
    path = tmp_path / "garbage.json"
    path.write_bytes(b"\xff\xfe\x00\x81")
    with pytest.raises(NotJsonError):
        load_file(path)


@pytest.mark.parametrize("document", [[1, 2], {"hello": "world"}, {"schema": "tcpadvise.report/1"}, "text"])
def test_json_that_is_not_a_trace(tmp_path, document):
    path = write_json(tmp_path / "other.json", document)
    with pytest.raises(NotATraceError, match="not a tcpadvise trace"):
        load_file(path)


def test_unknown_version_names_the_known_ones(tmp_path):
    path = write_json(tmp_path / "future.json", make_trace(schema="tcpadvise.trace/9"))
    with pytest.raises(UnknownSchemaError) as raised:
        load_file(path)
    assert "tcpadvise.trace/9" in str(raised.value)
    assert "tcpadvise.trace/1" in str(raised.value)


def test_invalid_trace_names_where(tmp_path):
    socket = make_socket()
    del socket["writes"]["calls"]
    path = write_trace(tmp_path, make_trace(sockets=[socket]))
    with pytest.raises(InvalidTraceError) as raised:
        load_file(path)
    message = str(raised.value)
    assert "sockets/0/writes" in message
    assert "'calls' is a required property" in message


def test_invalid_manifest_is_caught_too(tmp_path):
    path = write_json(tmp_path / "record.json", make_manifest(exit_status="zero"))
    with pytest.raises(InvalidTraceError, match="exit_status"):
        load_file(path)


def test_every_input_error_is_bad_input_with_exit_status_2():
    for error_class in (
        MissingPathError,
        NoTracesError,
        NotJsonError,
        NotATraceError,
        UnknownSchemaError,
        InvalidTraceError,
    ):
        assert issubclass(error_class, BadInputError)
        assert error_class.exit_code == 2


def test_long_validation_messages_are_shortened(tmp_path):
    path = write_trace(tmp_path, make_trace(sockets={"not": "a list " * 100}))
    with pytest.raises(InvalidTraceError) as raised:
        load_file(path)
    assert len(str(raised.value)) < 250


def _mutations(document, path=()):
    """Every value of a document replaced in turn by one of another JSON type (and a few edge values)."""
    if isinstance(document, dict):
        for key, value in document.items():
            for new in ("text", -1, 2**70, 1.5, None, [], {}):
                if type(new) is not type(value):
                    yield (*path, key), new
            yield from _mutations(value, (*path, key))
    elif isinstance(document, list):
        for index, value in enumerate(document[:3]):
            yield from _mutations(value, (*path, index))


def _replaced(document, path, new):
    document = json.loads(json.dumps(document))
    target = document
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = new
    return document


def test_the_fast_validator_agrees_with_jsonschema_on_mutated_traces():
    """jsonschema-rs decides validity and jsonschema words the error: they must agree on what is valid."""
    trace = make_trace(sockets=[make_socket()])
    validator = schemas.validator(reader.TRACE_SCHEMA)
    checked = 0
    for path, new in _mutations(trace):
        document = _replaced(trace, path, new)
        assert reader._valid(reader.TRACE_SCHEMA, document) == validator.is_valid(document), (path, new)
        checked += 1
    assert checked > 100
