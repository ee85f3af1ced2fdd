"""Partial overwrites from a Spark DataFrame (issue #35): ``dal.write(spark_df, where=…)`` and
``overwrite='partitions'``. The executors stage the files (checking every row against the predicate; reporting the
partitions they wrote), the driver commits ONE Delta version on the version it read. Each result is compared, rows
by id, with the same operation done by delta-rs (``write_deltalake(mode='overwrite', predicate=)``) on a copy of
the table, read by delta-rs's own engine, and read back through Spark (``to_spark``)."""

from __future__ import annotations

import hashlib
import shutil
import threading
import time
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake

import dal
from dal.catalog import Catalog
from dal.errors import DalError, WriteConflict

DAYS = [date(2026, 1, d) for d in range(1, 7)]


def days(ids: range, tag: str = "old") -> pa.Table:
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "date": pa.array([DAYS[i % len(DAYS)] for i in ids], pa.date32()),
            "score": pa.array([float(i) / 2 for i in ids]),
            "tag": [tag] * len(ids),
        }
    )


def by_id(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.select(["id", "date", "score", "tag"]).to_pylist(), key=lambda r: (r["id"], r["tag"]))


def delta_rs(path: str) -> pa.Table:
    """The newest version as delta-rs's own engine reads it."""
    return pa.table(QueryBuilder().register("t", DeltaTable(path)).execute("select * from t").read_all())


def location(cat: Catalog, name: str) -> str:
    return cat.get_dataset(name).location


def copy_of(cat: Catalog, name: str, tmp_path: Path) -> str:
    copy = tmp_path / f"reference-{name}"
    shutil.copytree(location(cat, name), copy)
    return str(copy)


def tree_hash(root: str) -> str:
    """Every file below ``root`` (path and bytes): the table as storage holds it."""
    h = hashlib.sha256()
    for p in sorted(Path(root).rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def spark_rows(spark: Any, name: str) -> list[dict[str, Any]]:
    return by_id(pa.Table.from_pandas(dal.open(name).to_spark(spark).toPandas(), preserve_index=False))


def test_where_on_a_partition_range_equals_delta_rs(sqlite_env: Catalog, spark: Any, tmp_path: Path) -> None:
    v0 = dal.write(days(range(60)), "sc.days", partition_by=["date"])
    ref = copy_of(sqlite_env, "sc.days", tmp_path)
    new = days(range(100, 120), "new").filter(pa.compute.is_in(pa.compute.field("date"), pa.array(DAYS[2:4])))
    where = "date >= '2026-01-03' AND date < '2026-01-05'"
    v1 = dal.write(spark.createDataFrame(new.to_pandas()), "sc.days", mode="overwrite", where=where)
    write_deltalake(ref, new, mode="overwrite", predicate="date >= '2026-01-03'::date AND date < '2026-01-05'::date")

    assert v1.number == v0.number + 1 and [v.number for v in sqlite_env.versions("sc.days")] == [0, 1]
    expected = by_id(delta_rs(ref))
    assert by_id(delta_rs(location(sqlite_env, "sc.days"))) == expected
    assert by_id(dal.open("sc.days").to_arrow()) == expected
    assert spark_rows(spark, "sc.days") == expected
    assert by_id(dal.open("sc.days", 0).to_arrow()) == by_id(days(range(60)))  # the version read is untouched
    assert DeltaTable(location(sqlite_env, "sc.days")).version() == 1  # one Delta commit
    edges = sqlite_env.upstream("sc.days", 1)
    assert any(
        e.upstream == "sc.days" and e.upstream_version == 0 and (e.filters or "").startswith("NOT") for e in edges
    )


def test_where_on_a_data_column_keeps_the_other_rows_of_the_files(
    sqlite_env: Catalog, spark: Any, tmp_path: Path
) -> None:
    dal.write(days(range(40)), "sc.rows", partition_by=["date"])
    ref = copy_of(sqlite_env, "sc.rows", tmp_path)
    new = days(range(5, 15), "new").filter(pa.compute.greater_equal(pa.compute.field("score"), 3.0))
    v = dal.write(spark.createDataFrame(new.to_pandas()), "sc.rows", mode="overwrite", where="score >= 3 AND id < 30")
    write_deltalake(ref, new, mode="overwrite", predicate="score >= 3 AND id < 30")

    expected = by_id(delta_rs(ref))
    assert len(expected) == 40 - 24 + len(new)  # ids 6..29 replaced by the 9 new rows
    assert by_id(delta_rs(location(sqlite_env, "sc.rows"))) == expected
    assert by_id(dal.open("sc.rows").to_arrow()) == expected
    assert spark_rows(spark, "sc.rows") == expected
    assert v.number == 1 and DeltaTable(location(sqlite_env, "sc.rows")).version() == 1


def test_unpartitioned_table_and_a_partition_value_with_a_space(
    sqlite_env: Catalog, spark: Any, tmp_path: Path
) -> None:
    base = pa.table({"id": list(range(10)), "p": ["a b", "c", None, "a b", "c"] * 2, "x": [1.0] * 10})
    dal.write(base, "sc.odd", partition_by=["p"])
    ref = copy_of(sqlite_env, "sc.odd", tmp_path)
    new = pa.table({"id": [50, 51], "p": ["a b", None], "x": [9.0, 9.0]})
    dal.write(spark.createDataFrame(new.to_pandas()), "sc.odd", mode="overwrite", overwrite="partitions")
    write_deltalake(ref, new, mode="overwrite", predicate="p = 'a b' OR p IS NULL")

    def ids(t: pa.Table) -> list[tuple[Any, ...]]:
        return sorted((r["id"], r["p"], r["x"]) for r in t.select(["id", "p", "x"]).to_pylist())

    assert ids(delta_rs(location(sqlite_env, "sc.odd"))) == ids(delta_rs(ref))
    assert ids(dal.open("sc.odd").to_arrow()) == ids(delta_rs(ref))

    flat = pa.table({"id": list(range(10)), "x": [float(i) for i in range(10)]})
    dal.write(flat, "sc.flat")
    ref2 = copy_of(sqlite_env, "sc.flat", tmp_path)
    repl = pa.table({"id": [3, 4], "x": [30.0, 40.0]})
    dal.write(spark.createDataFrame(repl.to_pandas()), "sc.flat", mode="overwrite", where="id >= 3 AND id < 7")
    write_deltalake(ref2, repl, mode="overwrite", predicate="id >= 3 AND id < 7")
    flat_ids = sorted((r["id"], r["x"]) for r in delta_rs(ref2).to_pylist())
    assert sorted((r["id"], r["x"]) for r in dal.open("sc.flat").to_arrow().to_pylist()) == flat_ids


def test_partitions_mode_replaces_exactly_the_partitions_present(
    sqlite_env: Catalog, spark: Any, tmp_path: Path
) -> None:
    dal.write(days(range(36)), "sc.parts", partition_by=["date"])
    ref = copy_of(sqlite_env, "sc.parts", tmp_path)
    new = days(range(200, 212), "new").filter(pa.compute.is_in(pa.compute.field("date"), pa.array([DAYS[1], DAYS[4]])))
    frame = spark.createDataFrame(new.to_pandas()).repartition(3)  # several tasks, each reporting its partitions
    v = dal.write(frame, "sc.parts", mode="overwrite", overwrite="partitions")
    write_deltalake(ref, new, mode="overwrite", predicate="date = '2026-01-02'::date OR date = '2026-01-05'::date")

    expected = by_id(delta_rs(ref))
    assert by_id(delta_rs(location(sqlite_env, "sc.parts"))) == expected
    assert spark_rows(spark, "sc.parts") == expected
    untouched = [r for r in by_id(dal.open("sc.parts").to_arrow()) if r["date"] not in (DAYS[1], DAYS[4])]
    assert untouched == [r for r in by_id(days(range(36))) if r["date"] not in (DAYS[1], DAYS[4])]
    assert v.number == 1
    edges = sqlite_env.upstream("sc.parts", 1)
    assert any(
        e.upstream == "sc.parts" and e.upstream_version == 0 and "2026-01-05" in (e.filters or "") for e in edges
    )


def test_a_row_outside_the_predicate_is_refused_and_nothing_is_committed(sqlite_env: Catalog, spark: Any) -> None:
    dal.write(days(range(30)), "sc.refused", partition_by=["date"])
    where = location(sqlite_env, "sc.refused")
    before = tree_hash(str(Path(where) / "_delta_log"))
    files_before = {p for p in Path(where).rglob("*.parquet")}
    bad = days(range(100, 112), "new")  # every day: most rows fall outside date = 2026-01-03
    with pytest.raises(DalError, match="do not match"):
        dal.write(spark.createDataFrame(bad.to_pandas()), "sc.refused", mode="overwrite", where="date = '2026-01-03'")
    assert tree_hash(str(Path(where) / "_delta_log")) == before  # no commit
    assert [v.number for v in sqlite_env.versions("sc.refused")] == [0]
    assert by_id(dal.open("sc.refused").to_arrow()) == by_id(days(range(30)))
    assert {p for p in Path(where).rglob("*.parquet")} >= files_before


def test_a_commit_after_the_version_read_is_a_conflict(
    sqlite_env: Catalog, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dal.write(days(range(12)), "sc.race", partition_by=["date"])
    where = location(sqlite_env, "sc.race")
    marker, release = tmp_path / "paused", tmp_path / "release"
    monkeypatch.setenv("DAL_TEST_PAUSE", "spark-files-staged")
    monkeypatch.setenv("DAL_TEST_PAUSE_FILE", str(marker))
    monkeypatch.setenv("DAL_TEST_RELEASE_FILE", str(release))
    new = days(range(90, 102), "new").filter(pa.compute.equal(pa.compute.field("date"), DAYS[0]))
    errors: list[BaseException] = []
    frame = spark.createDataFrame(new.to_pandas())

    def write() -> None:
        try:
            dal.write(frame, "sc.race", mode="overwrite", where="date = '2026-01-01'")
        except BaseException as e:
            errors.append(e)

    writer = threading.Thread(target=write)
    writer.start()
    deadline = time.monotonic() + 120
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), errors
    write_deltalake(where, days(range(500, 503), "other"), mode="append")  # another writer, after the read
    release.touch()
    writer.join(120)
    assert len(errors) == 1 and isinstance(errors[0], WriteConflict)
    assert {r["id"] for r in delta_rs(where).to_pylist()} == set(range(12)) | {500, 501, 502}


PETA = dal.TensorSchema(
    "Rows",
    [
        dal.TensorField("id", np.int64, (), dal.ScalarCodec()),
        dal.TensorField("day", np.str_, (), dal.ScalarCodec()),
        dal.TensorField("x", np.float32, (2,), dal.NdarrayCodec()),
    ],
)


def peta_rows(ids: range, shift: float = 0.0) -> list[dict[str, Any]]:
    return [{"id": i, "day": f"d{i % 3}", "x": np.full(2, i + shift, np.float32)} for i in ids]


def peta_frame(spark: Any, ids: list[int], shift: float) -> Any:
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(i, f"d{i % 3}") for i in ids], "id long, day string")
    x = (F.col("id").cast("float") + F.lit(shift)).cast("float")
    return df.select("id", "day", F.array(x, x).alias("x"))


def peta_read(name: str) -> list[tuple[int, str, float]]:
    frame = dal.open(name).to_pandas()
    return sorted(
        (int(i), str(d), float(np.asarray(x).reshape(-1)[0]))
        for i, d, x in zip(frame["id"], frame["day"], frame["x"], strict=True)
    )


def test_petastorm_where_and_partitions_from_spark_agree_with_pandas(sqlite_env: Catalog, spark: Any) -> None:
    dal.write(peta_rows(range(30)), "sc.pet", format="petastorm", schema=PETA, partition_by=["day"])
    dal.write(peta_rows(range(30)), "sc.pet_ref", format="petastorm", schema=PETA, partition_by=["day"])
    new = [i for i in range(100, 112) if i % 3 == 2 and i < 110]  # day d2 only
    where = "day = 'd2' AND id >= 10"
    v = dal.write(peta_frame(spark, new, 0.5), "sc.pet", format="petastorm", mode="overwrite", where=where)
    ref = [r for r in peta_rows(range(100, 112), 0.5) if r["id"] in new]
    dal.write(ref, "sc.pet_ref", format="petastorm", mode="overwrite", where=where)
    assert v.number == 1 and peta_read("sc.pet") == peta_read("sc.pet_ref")
    assert {i for i, _d, _x in peta_read("sc.pet")} == {*(i for i in range(30) if i % 3 != 2 or i < 10), *new}

    with pytest.raises(DalError, match="do not match"):  # a row of d0: refused, nothing committed
        dal.write(peta_frame(spark, [300, 302], 0.0), "sc.pet", format="petastorm", mode="overwrite", where=where)
    assert [x.number for x in sqlite_env.versions("sc.pet")] == [0, 1]

    d0 = peta_frame(spark, [600, 603], 0.25)
    v2 = dal.write(d0, "sc.pet", format="petastorm", mode="overwrite", overwrite="partitions")
    dal.write([r for r in peta_rows(range(600, 604), 0.25) if r["day"] == "d0"], "sc.pet_ref", format="petastorm",
              mode="overwrite", overwrite="partitions")  # fmt: skip
    assert v2.number == 2 and peta_read("sc.pet") == peta_read("sc.pet_ref")
    assert {d for i, d, _x in peta_read("sc.pet") if i in (600, 603)} == {"d0"}
