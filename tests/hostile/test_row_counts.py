"""Row counts from another writer's Delta statistics are checked against the Parquet footers before dal records
them (issue #22: a log claiming ``numRecords`` 10**12 for a 10-row file made ``count()`` say 10**12 while
``to_arrow()`` had 10 rows): such a commit is refused, an honest one registers with ``count() == len(to_arrow())``."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

import dal
from catalog import Catalog
from catalog.errors import DatasetNotFound
from dal.errors import FormatError


def _claim(table: Path, version: int, rows: object) -> None:
    log = table / "_delta_log" / f"{version:020d}.json"
    actions = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    for a in actions:
        if "add" in a:
            stats = json.loads(a["add"]["stats"])
            stats["numRecords"] = rows
            a["add"]["stats"] = json.dumps(stats)
    log.write_text("".join(json.dumps(a) + "\n" for a in actions))


def test_an_honest_foreign_table_counts_what_it_reads(sqlite_env: Catalog, tmp_path: Path) -> None:
    write_deltalake(str(tmp_path / "t"), pa.table({"a": list(range(10))}))
    write_deltalake(str(tmp_path / "t"), pa.table({"a": [10, 11]}), mode="append")
    dal.register("x.honest", str(tmp_path / "t"))
    ds = dal.open("x.honest")
    assert ds.count() == len(ds.to_arrow()) == 12


@pytest.mark.parametrize("claim", [10**12, 11, 0, -1, "10"])
def test_a_lying_row_count_is_refused(sqlite_env: Catalog, tmp_path: Path, claim: object) -> None:
    write_deltalake(str(tmp_path / "t"), pa.table({"a": list(range(10))}))
    _claim(tmp_path / "t", 0, claim)
    with pytest.raises(
        FormatError, match=r"Delta version 0\): the log says .* rows \(numRecords\) but its Parquet footer says 10"
    ):
        dal.register("x.liar", str(tmp_path / "t"))
    with pytest.raises(DatasetNotFound):
        sqlite_env.get_dataset("x.liar")


def test_a_lying_append_is_refused_by_sync(sqlite_env: Catalog, tmp_path: Path) -> None:
    write_deltalake(str(tmp_path / "t"), pa.table({"a": list(range(10))}))
    dal.register("x.later", str(tmp_path / "t"))
    write_deltalake(str(tmp_path / "t"), pa.table({"a": [10]}), mode="append")
    _claim(tmp_path / "t", 1, 10**12)
    with pytest.raises(FormatError, match="numRecords"):
        dal.sync("x.later")
    ds = dal.open("x.later")
    assert ds.number == 0 and ds.count() == len(ds.to_arrow()) == 10
