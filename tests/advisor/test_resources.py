"""Every file the output cites ships in the package (tcpadvise/data), so that no
finding or written config points at a path only a checkout has."""

import re

import pytest
from tcpadvise.resources import DOCS_DIR, SEEDS_DIR, doc_path, seed_path
from tcpadvise.rules.rulebook import builtin_rule_files, load_rulebook

from .conftest import REPO

SHARED_SEEDS = REPO.parent / "shared" / "seeds"


def test_every_seed_a_rule_cites_is_shipped():
    cited = {seed for rule in load_rulebook().rules for seed in rule.data["source"].get("seeds", [])}
    assert cited and all(seed_path(seed).is_file() for seed in cited), cited


def test_shipped_seeds_are_the_shared_ones():
    if not SHARED_SEEDS.is_dir():
        pytest.skip(f"{SHARED_SEEDS} is not here to compare with")
    shared = {path.name: path.read_bytes() for path in SHARED_SEEDS.iterdir() if path.is_file()}
    assert {path.name: path.read_bytes() for path in SEEDS_DIR.iterdir()} == shared


def test_docs_are_the_checkouts_own():
    # Links in a checkout (a built package holds copies of the files).
    assert doc_path("README.md").read_text() == (REPO / "README.md").read_text()
    assert doc_path("policy-config.md").read_text() == (REPO / "docs" / "policy-config.md").read_text()


def test_rules_cite_no_path_of_the_source_tree():
    # A note names a doc through {docs}, which the finding fills with DOCS_DIR.
    for path in builtin_rule_files():
        text = path.read_text()
        assert "../shared" not in text, path
        for cited in re.findall(r"([\w./{}-]+\.md)", text):
            assert cited.startswith("{docs}/") and (DOCS_DIR / cited.removeprefix("{docs}/")).is_file(), (path, cited)
