"""Files the output cites, shipped in the package (tcpadvise/data), so that a
path in a finding or a written config exists wherever tcpadvise is installed:
the seeds' summaries whose figures the findings quote (copies of
../shared/seeds, kept equal by tests/advisor/test_resources.py) and the docs
(README.md, policy-config.md)."""

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
SEEDS_DIR = DATA_DIR / "seeds"
DOCS_DIR = DATA_DIR / "docs"
# In a rule's source.note, stands for DOCS_DIR.
DOCS_PLACEHOLDER = "{docs}"


def seed_path(name: str) -> Path:
    """The shipped copy of seed file `name` (e.g. 004_5f796d16d3e235bb.txt)."""
    return SEEDS_DIR / name


def doc_path(name: str) -> Path:
    """The shipped copy of doc `name` (README.md, policy-config.md)."""
    return DOCS_DIR / name
