"""Data that changes (issue #35): replace part of a dataset (``where=``, ``overwrite='partitions'``) and delete
rows (``dal.delete``), each checked against the same operation done by delta-rs on a copy of the table (rows by
id), plus the refusals (rows outside the predicate, unknown columns, a version overtaken, read-only, Petastorm)."""

from __future__ import annotations

import shutil
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import dal
from dal.catalog import Catalog
from dal.errors import DalError, FilterError, ReadOnlyDataset, WriteConflict
from tests.conftest import use_catalog

DAYS = [date(2026, 1, d) for d in range(1, 7)]


def days(ids: range, tag: str = "old") -> pa.Table:
    """Rows ``ids``, one day each in turn, partitioned by ``date``."""
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "date": pa.array([DAYS[i % len(DAYS)] for i in ids], pa.date32()),
            "score": pa.array([float(i) / 2 for i in ids]),
            "tag": [tag] * len(ids),
        }
    )


def rows(table: pa.Table) -> list[dict[str, object]]:
    return sorted(table.select(["id", "date", "score", "tag"]).to_pylist(), key=lambda r: (r["id"], r["tag"]))


@pytest.fixture(params=["sqlite", "served"])
def sqlite_env(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Catalog:
    """dal's default catalog: a fresh SQLite file, and once more a ``dal serve`` catalog (the same results)."""
    url = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "served_url")
    return use_catalog(str(url), tmp_path, monkeypatch)


def location(cat: Catalog, name: str) -> str:
    return cat.get_dataset(name).location


def reference(cat: Catalog, name: str, tmp_path: Path) -> str:
    """A copy of the table as it is now: delta-rs's own operation runs on it."""
    copy = tmp_path / f"reference-{name}"
    shutil.copytree(location(cat, name), copy)
    return str(copy)


def data_files(where: str) -> set[str]:
    return {str(p.relative_to(where)) for p in Path(where).rglob("*.parquet") if "_delta_log" not in p.parts}


def test_replace_a_day_range_equals_delta_rs_on_a_copy(sqlite_env: Catalog, tmp_path: Path) -> None:
    v0 = dal.write(days(range(60)), "ch.days", partition_by=["date"])
    ref = reference(sqlite_env, "ch.days", tmp_path)
    new = days(range(100, 110), "new").filter(
        pa.compute.is_in(pa.compute.field("date"), pa.array(DAYS[2:4], pa.date32()))
    )
    before = data_files(location(sqlite_env, "ch.days"))
    v1 = dal.write(new, "ch.days", mode="overwrite", where="date >= '2026-01-03' AND date < '2026-01-05'")
    write_deltalake(ref, new, mode="overwrite", predicate="date >= '2026-01-03'::date AND date < '2026-01-05'::date")

    assert v1.number == v0.number + 1 and [v.number for v in sqlite_env.versions("ch.days")] == [0, 1]
    assert rows(dal.open("ch.days").to_arrow()) == rows(DeltaTable(ref).to_pyarrow_table())
    assert rows(dal.open("ch.days", 0).to_arrow()) == rows(days(range(60)))  # the version read is untouched
    # only the two replaced partitions got files; every other partition's files are the same ones
    added = data_files(location(sqlite_env, "ch.days")) - before
    assert added and {f.split("/")[0] for f in added} == {"date=2026-01-03", "date=2026-01-04"}
    kept = {f.uri.rsplit("/", 2)[-2] for f in dal.open("ch.days").files()}
    assert kept == {f"date={d.isoformat()}" for d in DAYS}
    edges = sqlite_env.upstream("ch.days", 1)
    assert any(
        e.upstream == "ch.days" and e.upstream_version == 0 and (e.filters or "").startswith("NOT") for e in edges
    )


def test_replace_rows_by_a_column_that_is_not_a_partition(sqlite_env: Catalog, tmp_path: Path) -> None:
    dal.write(days(range(40)), "ch.rows", partition_by=["date"])
    ref = reference(sqlite_env, "ch.rows", tmp_path)
    new = pa.table({"id": pa.array([5, 7], pa.int64()), "date": pa.array(DAYS[:2], pa.date32()),
                    "score": [99.0, 98.0], "tag": ["new", "new"]})  # fmt: skip
    dal.write(new, "ch.rows", mode="overwrite", where=dal.col("id").between(5, 9))
    write_deltalake(ref, new, mode="overwrite", predicate="id >= 5 AND id <= 9")
    assert rows(dal.open("ch.rows").to_arrow()) == rows(DeltaTable(ref).to_pyarrow_table())


def test_dynamic_partition_overwrite_equals_delta_rs_on_a_copy(sqlite_env: Catalog, tmp_path: Path) -> None:
    dal.write(days(range(60)), "ch.parts", partition_by=["date"])
    ref = reference(sqlite_env, "ch.parts", tmp_path)
    new = days(range(200, 203), "new")  # rows in 2026-01-03 (200 % 6 = 2), 01-04 and 01-05
    before = data_files(location(sqlite_env, "ch.parts"))
    v = dal.write(new.to_pandas(), "ch.parts", mode="overwrite", overwrite="partitions")
    present = " OR ".join(f"date = '{d.isoformat()}'::date" for d in DAYS[2:5])
    write_deltalake(ref, new, mode="overwrite", predicate=present)
    assert v.number == 1
    assert rows(dal.open("ch.parts").to_arrow()) == rows(DeltaTable(ref).to_pyarrow_table())
    added = data_files(location(sqlite_env, "ch.parts")) - before
    assert {f.split("/")[0] for f in added} == {"date=2026-01-03", "date=2026-01-04", "date=2026-01-05"}


def test_a_one_partition_overwrite_writes_only_that_partition(sqlite_env: Catalog) -> None:
    dal.write(days(range(600)), "ch.one", partition_by=["date"])
    before = data_files(location(sqlite_env, "ch.one"))
    dal.write(days(range(1000, 1001), "new"), "ch.one", mode="overwrite", overwrite="partitions")  # 1000 % 6 = 4
    added = data_files(location(sqlite_env, "ch.one")) - before
    assert len(added) == 1 and next(iter(added)).startswith("date=2026-01-05/")
    files = dal.open("ch.one").files()
    assert len(files) == len(DAYS)  # one file per partition: five untouched, one new
    assert dal.open("ch.one").filter("date = '2026-01-05'").count() == 1


def test_rows_outside_the_predicate_are_refused_before_anything_is_written(sqlite_env: Catalog) -> None:
    dal.write(days(range(12)), "ch.bad", partition_by=["date"])
    before = data_files(location(sqlite_env, "ch.bad"))
    with pytest.raises(DalError, match=r"3 of the 6 rows written do not match it.*nothing was written"):
        dal.write(days(range(100, 106), "new"), "ch.bad", mode="overwrite", where="date >= '2026-01-03' AND "
                  "date < '2026-01-07' AND id <> 104")  # fmt: skip
    reader = days(range(100, 106), "new").to_reader()  # a stream: refused as it is written, before the commit
    with pytest.raises(DalError, match="do not match it"):
        dal.write(reader, "ch.bad", mode="overwrite", where="date = '2026-01-01'")
    assert [v.number for v in sqlite_env.versions("ch.bad")] == [0]
    assert rows(dal.open("ch.bad").to_arrow()) == rows(days(range(12)))
    assert data_files(location(sqlite_env, "ch.bad")) >= before


def test_in_memory_rows_outside_the_predicate_leave_no_file(sqlite_env: Catalog) -> None:
    dal.write(days(range(12)), "ch.clean", partition_by=["date"])
    before = data_files(location(sqlite_env, "ch.clean"))
    with pytest.raises(DalError, match="do not match it"):
        dal.write(days(range(100, 106), "new"), "ch.clean", mode="overwrite", where="id < 103")
    assert data_files(location(sqlite_env, "ch.clean")) == before


def test_the_predicate_is_checked_like_every_filter(sqlite_env: Catalog) -> None:
    dal.write(days(range(6)), "ch.cols", partition_by=["date"])
    with pytest.raises(FilterError, match="unknown column 'dte'"):
        dal.write(days(range(1)), "ch.cols", mode="overwrite", where="dte = '2026-01-01'")
    with pytest.raises(FilterError, match="unknown column 'scor'"):
        dal.delete("ch.cols", where="scor > 1")
    with pytest.raises(DalError, match="needs mode='overwrite'"):
        dal.write(days(range(1)), "ch.cols", where="id = 0")
    with pytest.raises(DalError, match="not both"):
        dal.write(days(range(1)), "ch.cols", mode="overwrite", where="id = 0", overwrite="partitions")
    with pytest.raises(DalError, match="overwrite must be 'table' or 'partitions'"):
        dal.write(days(range(1)), "ch.cols", mode="overwrite", overwrite="dynamic")  # type: ignore[arg-type]
    with pytest.raises(DalError, match="needs where="):
        dal.delete("ch.cols", where="")
    assert [v.number for v in sqlite_env.versions("ch.cols")] == [0]


def test_a_literal_the_column_cannot_hold_matches_no_row(sqlite_env: Catalog) -> None:
    dal.write(days(range(6)), "ch.lit", partition_by=["date"])
    v = dal.delete("ch.lit", where="id = 1.5")  # bound: false on every row; delta-rs would cast 1.5 to 1
    assert v.number == 0 and dal.open("ch.lit").count() == 6


def test_delete_equals_delta_rs_delete_on_a_copy(sqlite_env: Catalog, tmp_path: Path) -> None:
    dal.write(days(range(60)), "ch.del", partition_by=["date"])
    dal.write(days(range(60, 90)), "ch.del")
    ref = reference(sqlite_env, "ch.del", tmp_path)
    v = dal.delete("ch.del", where="score >= 10 AND score < 20 OR date = '2026-01-06'")
    DeltaTable(ref).delete("(score >= 10 AND score < 20) OR date = '2026-01-06'::date")
    assert v.number == 2
    assert rows(dal.open("ch.del").to_arrow()) == rows(DeltaTable(ref).to_pyarrow_table())
    assert dal.open("ch.del", 1).count() == 90  # older versions keep the rows until they expire
    assert dal.delete("ch.del", where="id > 1000").number == 2  # no row matches: no new version
    assert [e.filters for e in sqlite_env.upstream("ch.del", 2) if e.upstream == "ch.del"] == [
        "NOT ((score >= 10.0 AND score < 20.0) OR date = DATE '2026-01-06')"
    ]


def test_an_unrecorded_commit_is_part_of_what_a_delete_reads(sqlite_env: Catalog) -> None:
    dal.write(days(range(12)), "ch.base", partition_by=["date"])
    write_deltalake(location(sqlite_env, "ch.base"), days(range(12, 14)), mode="append")  # another tool
    v = dal.delete("ch.base", where="id < 3")  # on storage version 1, the newest: its rows stay
    assert (v.number, v.storage_version) == (2, 2)
    assert sorted(dal.open("ch.base").to_arrow().column("id").to_pylist()) == list(range(3, 14))


@pytest.mark.parametrize("change", ["delete", "where"])
def test_a_change_commits_only_on_the_version_it_read(
    sqlite_env: Catalog, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    import dal.writes.commit

    name = f"ch.race.{change}"
    dal.write(days(range(12)), name, partition_by=["date"])

    def another_writer(point: str) -> None:  # commits after the change read the table, before it commits
        if point == "intent-registered":
            write_deltalake(location(sqlite_env, name), days(range(12, 14)), mode="append")

    monkeypatch.setattr(dal.writes.commit, "pause", another_writer)
    with pytest.raises(WriteConflict, match="nothing was committed"):
        if change == "delete":
            dal.delete(name, where="id < 3")
        else:
            dal.write(days(range(100, 101)), name, mode="overwrite", where="date = '2026-01-05'")
    assert DeltaTable(location(sqlite_env, name)).version() == 1  # the other writer's commit only
    assert [v.number for v in sqlite_env.versions(name)] == [0]


def test_read_only_datasets_are_refused(sqlite_env: Catalog, tmp_path: Path) -> None:
    dal.write(days(range(6)), "ch.owner", partition_by=["date"])
    other = f"sqlite:///{tmp_path}/reader.db"  # another catalog reads it (one location is one dataset's in one)
    dal.register("ch.reader", location(sqlite_env, "ch.owner"), read_only=True, catalog=other)
    with pytest.raises(ReadOnlyDataset):
        dal.delete("ch.reader", where="id = 1", catalog=other)
    with pytest.raises(ReadOnlyDataset):
        dal.write(days(range(1)), "ch.reader", mode="overwrite", where="id = 0", catalog=other)
    assert [v.number for v in sqlite_env.versions("ch.owner")] == [0]


PETA = dal.TensorSchema(
    "Rows",
    [
        dal.TensorField("id", np.int64, (), dal.ScalarCodec()),
        dal.TensorField("day", np.str_, (), dal.ScalarCodec()),
        dal.TensorField("x", np.float32, (2,), dal.NdarrayCodec()),
    ],
)


def peta_rows(ids: range, shift: float = 0.0) -> list[dict[str, object]]:
    return [{"id": i, "day": f"d{i % 3}", "x": np.full(2, i + shift, np.float32)} for i in ids]


def peta_frame(name: str, version: int | None = None) -> pd.DataFrame:
    t = dal.open(name, version).to_arrow()
    frame = pd.DataFrame({"id": t.column("id").to_pylist(), "day": t.column("day").to_pylist()})
    frame["x0"] = [float(np.asarray(v).reshape(-1)[0]) for v in dal.open(name, version).to_pandas()["x"]]
    return frame.sort_values("id").reset_index(drop=True)


def test_petastorm_delete_and_partial_overwrite_agree_with_pandas(sqlite_env: Catalog) -> None:
    dal.write(peta_rows(range(30)), "ch.pet", format="petastorm", schema=PETA, partition_by=["day"])
    before = peta_frame("ch.pet")
    v1 = dal.delete("ch.pet", where="id >= 10 AND id < 14 AND day = 'd1'")  # ids 10 and 13
    expected = before[~((before["id"] >= 10) & (before["id"] < 14) & (before["day"] == "d1"))].reset_index(drop=True)
    assert v1.number == 1 and peta_frame("ch.pet").equals(expected)
    assert peta_frame("ch.pet", 0).equals(before)  # the version read keeps every row
    # the untouched partitions' files are carried as they are; only d1's file is rewritten
    files0 = {f.uri.rsplit("/", 2)[-2]: f.size_bytes for f in dal.open("ch.pet", 0).files()}
    files1 = {f.uri.rsplit("/", 2)[-2]: f.size_bytes for f in dal.open("ch.pet", 1).files()}
    assert files1["day=d0"] == files0["day=d0"] and files1["day=d2"] == files0["day=d2"]
    assert files1["day=d1"] < files0["day=d1"]

    d2 = [r for r in peta_rows(range(100, 106), 0.5) if r["day"] == "d2"]  # ids 101 and 104
    v2 = dal.write(d2, "ch.pet", format="petastorm", mode="overwrite", where="day = 'd2'")
    with pytest.raises(DalError, match="do not match it"):  # rows of d0 and d1 too: refused, nothing written
        dal.write(peta_rows(range(200, 203)), "ch.pet", format="petastorm", mode="overwrite", where="day = 'd2'")
    assert v2.number == 2 and [v.number for v in sqlite_env.versions("ch.pet")] == [0, 1, 2]
    got = peta_frame("ch.pet")
    assert sorted(got["id"]) == sorted([*expected[expected["day"] != "d2"]["id"], 101, 104])
    assert got[got["id"] == 104]["x0"].tolist() == [104.5]


def test_petastorm_dynamic_partition_overwrite_and_delete_of_nothing(sqlite_env: Catalog) -> None:
    dal.write(peta_rows(range(12)), "ch.pet2", format="petastorm", schema=PETA, partition_by=["day"])
    new = [r for r in peta_rows(range(300, 306), 0.25) if r["day"] == "d0"]
    v = dal.write(new, "ch.pet2", format="petastorm", mode="overwrite", overwrite="partitions")
    got = peta_frame("ch.pet2")
    assert v.number == 1 and sorted(got["id"]) == sorted([*(i for i in range(12) if i % 3), 300, 303])
    assert dal.delete("ch.pet2", where="id > 1000").number == 1  # nothing matched: no version


def test_delete_expire_and_gc_leave_no_file_holding_a_deleted_row(sqlite_env: Catalog) -> None:
    dal.write(days(range(300)), "ch.forget", partition_by=["date"])
    dal.write(days(range(300, 360)), "ch.forget")
    dal.lifecycle.gc("ch.forget", keep_last=5)  # nothing expires yet
    gone = "score >= 50 AND score < 80"  # ids 100 to 159
    doomed = set(range(100, 160))
    result = dal.lifecycle.forget("ch.forget", where=gone, safe_age=timedelta(0))
    assert result.version.number == 2 and result.expired == (0, 1)
    where = location(sqlite_env, "ch.forget")
    for f in Path(where).rglob("*.parquet"):  # every file under the location, the log's checkpoints included
        if "_delta_log" not in f.parts:
            ids = set(pa.parquet.read_table(f).column("id").to_pylist())
            assert not ids & doomed, f
    assert dal.lifecycle.verify_deleted("ch.forget", where=gone).files_with_rows == []
    kept = [v for v in sqlite_env.versions("ch.forget") if v.unavailable is None]
    assert [v.number for v in kept] == [2]
    expected = days(range(360)).to_pandas()
    expected = expected[(expected["score"] < 50) | (expected["score"] >= 80)]
    got = dal.open("ch.forget").to_pandas()
    assert sorted(got["id"]) == sorted(expected["id"])
    with pytest.raises(DalError):
        dal.open("ch.forget", 1).to_arrow()  # expired: unreadable


def test_verify_deleted_finds_rows_older_versions_still_hold(sqlite_env: Catalog) -> None:
    dal.write(days(range(30)), "ch.verify", partition_by=["date"])
    dal.delete("ch.verify", where="id = 4")
    found = dal.lifecycle.verify_deleted("ch.verify", where="id = 4")
    assert found.files_scanned > 0 and len(found.files_with_rows) == 1  # version 0's file still holds it
    assert found.files_with_rows[0][1] == 1


def test_the_cli_deletes_and_verifies(sqlite_env: Catalog) -> None:
    import json

    from click.testing import CliRunner, Result

    from dal.cli.app import cli

    def run(*args: str) -> Result:
        return CliRunner().invoke(cli, ["--catalog", str(sqlite_env.url), *args])

    dal.write(days(range(30)), "ch.cli", partition_by=["date"])
    r = run("delete", "ch.cli", "--where", "id < 5")
    assert r.exit_code == 0 and "version 1 without the rows matching id < 5" in r.stdout
    assert sorted(dal.open("ch.cli").to_arrow().column("id").to_pylist()) == list(range(5, 30))
    r = run("delete", "ch.cli", "--where", "id < 5", "--json")
    assert json.loads(r.stdout) == {"dataset": "ch.cli", "version": 1, "deleted": False}
    r = run("verify-deleted", "ch.cli", "--where", "id < 5")  # version 0's file still holds them
    assert r.exit_code == 1 and "still hold rows matching id < 5" in r.stderr
    assert run("gc", "ch.cli", "--keep-last", "1", "--force").exit_code == 0
    r = run("verify-deleted", "ch.cli", "--where", "id < 5", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["files_with_rows"] == []
    r = run("delete", "ch.cli", "--where", "idd < 5")
    assert r.exit_code == 1 and "unknown column 'idd'" in r.stderr


def test_verify_deleted_reads_column_mapped_files_and_never_calls_unknown_clean(tmp_path: Path) -> None:
    from deltalake import QueryBuilder

    from tests.conformance.conftest import CORPUS, require_corpus

    require_corpus()
    path = tmp_path / "mapped"
    shutil.copytree(CORPUS / "delta-rs/table_with_column_mapping", path)
    catalog = f"sqlite:///{tmp_path}/catalog.db"
    dal.register("ch.mapped", str(path), catalog=catalog, read_only=True)
    where = "\"Super Name\" > 'M'"  # a data column: files name it col-<uuid>
    expected = QueryBuilder().register("t", DeltaTable(str(path))).execute(f"select * from t where {where}")
    found = dal.lifecycle.verify_deleted("ch.mapped", where=where, catalog=catalog)
    assert sum(n for _p, n in found.files_with_rows) >= pa.table(expected.read_all()).num_rows > 0
    # a partition column in folders named at random: those files cannot be judged, so the check is not clean
    found = dal.lifecycle.verify_deleted("ch.mapped", where="\"Company Very Short\" = 'BMS'", catalog=catalog)
    assert found.files_unchecked and not found.clean
