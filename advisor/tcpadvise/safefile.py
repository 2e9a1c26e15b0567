"""Files the CLI writes into a directory others may write to (record's
OUT_DIR): created new, mode 0600, under a name nobody can guess, never
through a symlink, then renamed into place. A rename replaces a symlink
planted at the final name, never the file it points to."""
import contextlib
import os
import secrets
from collections.abc import Iterator
from typing import IO
from pathlib import Path

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def write_atomically(path: Path, text: str | bytes) -> None:
    """Write `text` (or bytes) to `path` through a hidden temporary file beside it; raises OSError."""
    with open_atomically(path, binary=isinstance(text, bytes)) as file:
        file.write(text)


@contextlib.contextmanager
def open_atomically(path: Path, *, binary: bool = True) -> Iterator[IO]:
    """A new hidden temporary file beside `path` to write to, renamed to `path` when the block ends
    without an exception (removed if it raises); raises OSError."""
    for _ in range(8):
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(temporary, _FLAGS, 0o600)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(17, "no unused temporary name", str(path))
    try:
        with os.fdopen(fd, "wb" if binary else "w") as file:
            yield file
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
