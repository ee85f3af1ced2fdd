"""``dal head`` and the UI's preview read an unfiltered version's first files through ``pyarrow.parquet``
(``Query.read_file``), not the scan's ``pyarrow.dataset`` fragments: on every Delta table of the conformance
corpus and petastorm's legacy datasets, the first rows (a few, and all of them, across files) are the scan's,
in the same order, with the same schema and metadata, or the same refusal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import dal
from dal.ops import first
from tests.conformance.conftest import copied, corpus_tables, each_table, require_corpus

TABLES = corpus_tables("delta") + corpus_tables("petastorm")
TAKEN: list[str] = []  # the tables whose rows came through read_file


def _first(catalog: str, number: int, n: int) -> pa.Table | str | None:
    try:
        return first.first_rows(dal.open("t.head", number, catalog=catalog), n)
    except Exception as e:  # the same refusal either way
        return f"{type(e).__name__}: {e}"


def _same(a: pa.Table | str | None, b: pa.Table | str | None) -> bool:
    if isinstance(a, pa.Table) and isinstance(b, pa.Table):
        return a.equals(b, check_metadata=True)
    return a == b


@each_table(TABLES)
def test_first_rows_by_file_are_the_scans(
    entry: dict[str, Any] | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = copied(entry, tmp_path)
    catalog = f"sqlite:///{tmp_path}/catalog.db"
    try:
        versions = dal.register("t.head", str(root), format=entry["kind"], catalog=catalog)
    except Exception:  # refused at register: nothing to preview (the conformance tests cover it)
        return
    readable = [v.number for v in versions if v.operation not in ("unavailable", "expired")]
    plain = first._plain
    taken: list[int] = []

    def spied(scan: Any, n: int) -> Any:
        out = plain(scan, n)
        taken.append(out is not None)
        return out

    for number in sorted({readable[0], readable[-1]}) if readable else []:
        for n in (7, 10**7):
            monkeypatch.setattr(first, "_plain", spied)
            by_file = _first(catalog, number, n)
            monkeypatch.setattr(first, "_plain", lambda scan, n: None)
            assert _same(by_file, _first(catalog, number, n)), f"version {number}, n={n}"
    if any(taken):
        TAKEN.append(entry["local_path"])


def test_many_tables_came_through_read_file() -> None:
    # run after the corpus above (same module, file order): the shortcut is not a path nothing takes
    if not TABLES:
        require_corpus()
    # 98 of the 190 here; the others have no numRecords (their files are planned by footer), are refused at
    # register or by the reader, or hold no file
    assert len(TAKEN) >= 80, TAKEN
