"""version_text: what `tcpadvise --version` prints: the CLI, the shim it would preload, the schemas."""

import importlib.metadata

PACKAGE = "tcpadvise"


def version_text() -> str:
    """Three lines: CLI version; the shim's path (it has no version string of its own); schema ids."""
    # Imported here: `tcpadvise --help` must not pay for the schema registry.
    from .. import schemas
    from ..errors import ShimNotFoundError
    from ..record.shim import find_shim

    try:
        cli_version = importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        cli_version = "unknown (not installed; running from a source tree)"
    try:
        shim = str(find_shim())
    except ShimNotFoundError as error:
        shim = f"not found ({error})"
    known = sorted(schemas.uri(name) for name in schemas.SCHEMA_FILES)
    return f"tcpadvise {cli_version}\nshim: {shim}\nschemas: {', '.join(known)}"
