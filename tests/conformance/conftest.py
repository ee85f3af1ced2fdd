"""Locate the shared conformance corpus (real tables written by other projects; never copied into the repo).

Absent (a clone without ``../shared``): the tests skip with that reason, unless ``CI=true``, where they fail.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

CORPUS = Path(__file__).parents[2].parent / "shared" / "conformance"
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def corpus_tables(kind: str) -> list[dict[str, Any]]:
    """The manifest entries of one kind ('delta', 'petastorm'), or [] when the corpus is absent."""
    manifest = CORPUS / "manifest.json"
    if not manifest.is_file():
        return []
    tables: list[dict[str, Any]] = json.loads(manifest.read_text())["tables"]
    return [t for t in tables if t.get("kind") == kind]


def require_corpus() -> Path:
    """The corpus root; skips (or fails under CI) when it is absent."""
    if not (CORPUS / "manifest.json").is_file():
        reason = f"the conformance corpus is not at {CORPUS} (a clone without ../shared/conformance)"
        if IN_CI:
            pytest.fail(reason)
        pytest.skip(reason)
    return CORPUS


def each_table(tables: list[dict[str, Any]]) -> pytest.MarkDecorator:
    """A test run once per manifest entry (its ``entry`` argument), named by its path; one ``corpus-absent``
    run (``entry`` None) when the corpus is absent, for ``copied`` to skip or fail."""
    ids = [t["local_path"] for t in tables] if tables else ["corpus-absent"]
    return pytest.mark.parametrize("entry", tables or [None], ids=ids)


def copied(entry: dict[str, Any] | None, tmp_path: Path) -> Path:
    """A writable copy of the entry's table at ``tmp_path / "table"`` (the corpus is read in place, never changed)."""
    require_corpus()
    assert entry is not None
    root = tmp_path / "table"
    shutil.copytree(CORPUS / entry["local_path"], root)
    return root
