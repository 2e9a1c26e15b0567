"""Reading a trace one socket at a time, so that a report's memory follows its socket groups, not its input.

A trace (schema 1) is one JSON object whose "sockets" array holds nearly all of it:
100 MB and 27,000 sockets for a busy server. `scan` reads it in chunks: the
other keys whole, each socket on its own (json's C decoder on one element at a
time), checked against the schema's socket definition and trace.check as it
comes, then dropped. What is kept is the trace's other keys, a few figures per
socket (its identity for telling connections apart, see Identity) and the file
kept open (the first KEEP_OPEN large traces) or else a zlib copy of it (level
1, about a tenth of it), from which `TraceSockets` yields the sockets again as
often as it is iterated, one at a time: the file may be replaced meanwhile (a
running program's next snapshot), what is read again is what was checked. An
ASCII file kept open is read again at the byte spans of its sockets, each
parsed by orjson (about twice as fast as json's decoder).

A file of another shape (the "sockets" key before "schema", anything the chunked
reader does not expect) and a trace that is not valid are read by the caller
the whole-document way instead, so a damaged trace is reported exactly as
before; `scan` returns None for them.
"""

import json
import os
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

# CHUNK: bytes read (and decompressed) at a time.
CHUNK = 1 << 20
# WHOLE_BELOW: a file smaller than this is parsed whole (one json.loads), its sockets kept compressed.
WHOLE_BELOW = 4 << 20
# KEEP_OPEN: large traces whose file is kept open to be read again (the others are kept compressed).
KEEP_OPEN = 64
_WHITESPACE = re.compile(r"[ \t\n\r]*")


class Unexpected(Exception):
    """The chunked reader met what it does not handle: the caller reads the file whole instead."""


class _Constant(ValueError):
    """NaN, Infinity or -Infinity: JSON has no such numbers (the whole-file reader names them)."""


def _refuse(_name: str):
    raise _Constant()


_DECODER = json.JSONDecoder(parse_constant=_refuse)


@dataclass(frozen=True)
class Identity:
    """What telling connections apart needs of a socket (model.report): its cookie, whether it was
    inherited or left unused, and its connection count."""

    cookie: object
    inherited: object
    used: object
    connections: int

    @classmethod
    def of(cls, socket: dict) -> "Identity":
        return cls(socket.get("cookie"), socket.get("inherited"), socket.get("used"), socket["connections"])


class TraceSockets:
    """A trace's sockets, yielded one at a time each time it is iterated: from the file it was read
    from, kept open (fd: a file replaced since, as a running program's next snapshot replaces it, is
    not what is read), or from a compressed copy of it; its length, identities and deferred errors
    counted when it was read."""

    def __init__(self, compressed: bytes | None, whole: bool, identities: list[Identity],
                 deferred_errors: dict[str, int], fd: int | None = None, spans: list[int] | None = None):
        self._compressed = compressed
        self._whole = whole
        self._fd = fd
        # spans: each socket's start and end byte in the open file, when known (an ASCII file).
        self._spans = spans
        self.identities = identities
        self.deferred_errors = deferred_errors

    def __del__(self):
        if self._fd is not None:
            os.close(self._fd)

    def __len__(self) -> int:
        return len(self.identities)

    def __bool__(self) -> bool:
        return bool(self.identities)

    def __iter__(self) -> Iterator[dict]:
        if self._whole:
            yield from json.loads(zlib.decompress(self._compressed))["sockets"]
            return
        if self._spans is not None:
            yield from _sockets_at(self._fd, self._spans)
            return
        if self._fd is not None:
            chunks = _read(self._fd)
        else:
            # A sixteenth of CHUNK compressed is about CHUNK of text (JSON compresses about tenfold).
            inflate, view, step = zlib.decompressobj(), memoryview(self._compressed), CHUNK // 16
            chunks = (inflate.decompress(view[start:start + step]) for start in range(0, len(view), step))
        reader = _Reader(_decoded(chunks))
        for kind, _, value in reader.members():
            if kind == "socket":
                yield value


def file_kept_open(data: dict) -> bool:
    """Whether a trace's sockets are read again from its file, kept open (scan's keep_open)."""
    sockets = data["sockets"]
    return isinstance(sockets, TraceSockets) and sockets._fd is not None


def deferred_errors(sockets) -> dict[str, int]:
    """Per errno, the bytes a policy held that could not be delivered, over a trace's sockets."""
    if isinstance(sockets, TraceSockets):
        return sockets.deferred_errors
    counted: dict[str, int] = {}
    for socket in sockets:
        _count_deferred(socket, counted)
    return counted


def _count_deferred(socket: dict, counted: dict[str, int]) -> None:
    for name, count in socket.get("policy", {}).get("counters", {}).get("deferred_errors", {}).items():
        counted[name] = counted.get(name, 0) + count


def compact(data: dict, raw: bytes) -> dict:
    """A trace read whole (json.loads of raw, already checked) with its sockets replaced by TraceSockets,
    and its call stacks ("call_sites") left in the compressed copy too: `opened` gives them back."""
    sockets = data["sockets"]
    counted: dict[str, int] = {}
    for socket in sockets:
        _count_deferred(socket, counted)
    kept = {key: value for key, value in data.items() if key != "call_sites"}
    return kept | {"sockets": TraceSockets(zlib.compress(raw, 1), True, [Identity.of(s) for s in sockets], counted)}


def opened(data: dict) -> tuple[dict, Iterable[dict]]:
    """A trace's data with every key it was read with, and its sockets to iterate: of a small trace
    loaded compact, read again whole (its call stacks too); else data itself and its sockets."""
    sockets = data["sockets"]
    if isinstance(sockets, TraceSockets) and sockets._whole:
        whole = json.loads(zlib.decompress(sockets._compressed))
        return {**whole, **data}, whole["sockets"]
    return data, sockets


def scan(path: Path, is_trace_schema, check_socket, check_header, keep_open: bool = False) -> dict | None:
    """The trace at path with its "sockets" as TraceSockets, read in chunks; None when the file is
    to be read whole (see the module's doc). is_trace_schema(value): whether a "schema" value names
    a trace; check_socket(socket) and check_header(header): whether each is valid and usable.
    keep_open: the sockets are read again from the file kept open, else from a compressed copy."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        scanned = _scan(fd, is_trace_schema, check_socket, check_header, keep_open)
    finally:
        if not keep_open or scanned is None:
            os.close(fd)
    return scanned


def _scan(fd: int, is_trace_schema, check_socket, check_header, keep_open: bool) -> dict | None:
    deflate = zlib.compressobj(1)
    parts: list[bytes] = []

    def raw_chunks() -> Iterator[bytes]:
        for chunk in _read(fd):
            if not keep_open:
                parts.append(deflate.compress(chunk))
            yield chunk

    header: dict = {}
    identities: list[Identity] = []
    counted: dict[str, int] = {}
    spans: list[int] = []
    streamed = False
    reader = _Reader(_decoded(raw_chunks()))
    try:
        for kind, key, value in reader.members(is_trace_schema):
            if kind == "socket":
                if not check_socket(value):
                    return None
                spans.extend(reader.span)
                identities.append(Identity.of(value))
                _count_deferred(value, counted)
                streamed = True
            elif key in header:
                return None  # a key twice: json.loads keeps the last, read it that way
            elif key == "sockets" and not streamed and value != []:
                return None  # before the schema said it is a trace: read whole
            else:
                header[key] = value
    except (Unexpected, ValueError, RecursionError):
        return None  # not JSON, NaN, nested too deep...: the whole-file reader says what
    if "sockets" not in header or not check_header({**header, "sockets": []}):
        return None
    if keep_open:
        return {**header, "sockets": TraceSockets(None, False, identities, counted, fd,
                                                  spans if reader.ascii else None)}
    parts.append(deflate.flush())
    return {**header, "sockets": TraceSockets(b"".join(parts), False, identities, counted)}


def _sockets_at(fd: int, spans: list[int]) -> Iterator[dict]:
    """The sockets at these (start, end) byte spans of the file, read CHUNK at a time and each parsed
    by orjson (about twice as fast as json; what it refuses, json parses as it did when checked)."""
    block, block_start = b"", 0
    for number in range(0, len(spans), 2):
        start, end = spans[number], spans[number + 1]
        if end > block_start + len(block):
            block_start = start
            block = os.pread(fd, max(CHUNK, end - start), start)
        text = block[start - block_start:end - block_start]
        try:
            yield orjson.loads(text)
        except orjson.JSONDecodeError:
            yield json.loads(text, parse_constant=_refuse)


def _read(fd: int) -> Iterator[bytes]:
    """The file's bytes from its start, CHUNK at a time."""
    offset = 0
    while chunk := os.pread(fd, CHUNK, offset):
        offset += len(chunk)
        yield chunk


def _decoded(chunks: Iterator[bytes]) -> Iterator[str]:
    """UTF-8 chunks as text (a character split across chunks is joined); invalid UTF-8 raises ValueError."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")()
    for chunk in chunks:
        yield decoder.decode(chunk)
    yield decoder.decode(b"", final=True)


class _Reader:
    """The members of one top-level JSON object read from text chunks: ("key", name, value) for each,
    and for the "sockets" array (once the schema names a trace) ("socket", index, value) per element."""

    def __init__(self, chunks: Iterator[str]):
        self._chunks = chunks
        self._text = ""
        self._at = 0
        self._done = False
        self._offset = 0  # characters read before _text[0]
        # ascii: every character so far is one byte, so a character offset is the file's byte offset.
        self.ascii = True
        # span: (start, end) in the text of the value _value read last.
        self.span = (0, 0)

    def _more(self) -> bool:
        """Append text (at least as much as is held: an element spanning chunks is parsed again a
        bounded number of times); False at the end."""
        if self._done:
            return False
        wanted = max(CHUNK, len(self._text) - self._at)
        pieces = [self._text[self._at:]]
        self._offset += self._at
        got = 0
        for piece in self._chunks:
            pieces.append(piece)
            self.ascii = self.ascii and piece.isascii()
            got += len(piece)
            if got >= wanted:
                break
        else:
            self._done = True
        self._text, self._at = "".join(pieces), 0
        return got > 0

    def _next_char(self) -> str:
        """The next character that is not whitespace ('' at the end), not consumed."""
        while True:
            self._at = _WHITESPACE.match(self._text, self._at).end()
            if self._at < len(self._text):
                return self._text[self._at]
            if not self._more():
                return ""

    def _expect(self, char: str) -> None:
        if self._next_char() != char:
            raise Unexpected(char)
        self._at += 1

    def _value(self):
        self._next_char()
        while True:
            try:
                value, end = _DECODER.raw_decode(self._text, self._at)
            except json.JSONDecodeError:
                if self._more():
                    continue
                raise Unexpected("value") from None
            if end == len(self._text) and not self._done:
                self._more()  # a number may go on in the next chunk: parsed again with it
                continue
            self.span = (self._offset + self._at, self._offset + end)
            self._at = end
            return value

    def members(self, is_trace_schema=lambda value: True) -> Iterator[tuple[str, object, object]]:
        self._expect("{")
        if self._next_char() == "}":
            self._at += 1
        else:
            schema = None
            while True:
                key = self._value()
                if type(key) is not str:
                    raise Unexpected("key")
                self._expect(":")
                if key == "sockets" and is_trace_schema(schema) and self._next_char() == "[":
                    self._at += 1
                    yield from self._elements()
                    yield "key", key, []
                else:
                    value = self._value()
                    if key == "schema":
                        schema = value
                    yield "key", key, value
                if self._closed_by("}"):
                    break
        if self._next_char() != "":
            raise Unexpected("end")

    def _elements(self) -> Iterator[tuple[str, int, object]]:
        if self._next_char() == "]":
            self._at += 1
            return
        index = 0
        while True:
            yield "socket", index, self._value()
            index += 1
            if self._closed_by("]"):
                return

    def _closed_by(self, close: str) -> bool:
        """Consumes the separator after a member or element: True at `close`, False at a comma."""
        separator = self._next_char()
        self._at += 1
        if separator == close:
            return True
        if separator != ",":
            raise Unexpected(",")
        return False
