"""Every Delta table of the conformance corpus (Spark, Databricks, delta-rs, the golden tables) is described
alike whether its commits' add actions are read as columns (``Tally.apply_lines``) or one action at a time: the
same versions, counts, partitions and properties, or the same error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dal.formats.delta import commit_adds, replay
from dal.formats.delta.format import DeltaFormat
from tests.conformance.conftest import copied, corpus_tables, each_table

TABLES = corpus_tables("delta")


def _described(root: Path) -> list[Any] | str:
    try:
        drafts = DeltaFormat().snapshots(str(root), {}, after=None, previous=None)
    except Exception as e:  # the same refusal either way
        return f"{type(e).__name__}: {e}"
    return [(d.storage_version, d.row_count, d.file_count, d.size_bytes, d.partitions, d.operation, d.schema,
             dict(d.properties)) for d in drafts]  # fmt: skip


@each_table(TABLES)
def test_columns_and_actions_describe_alike(
    entry: dict[str, Any] | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = copied(entry, tmp_path)
    monkeypatch.setattr(commit_adds, "COLUMNS_FROM", 1)  # every commit with an add read as columns
    columns = _described(root)
    monkeypatch.setattr(replay.Tally, "apply_lines", lambda self, version, lines, budget: False)
    assert _described(root) == columns
