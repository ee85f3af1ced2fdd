"""Never publish less than you read, for Spark DataFrames (Delta and Petastorm): an overwrite from Spark
(``dal.write(df, mode="overwrite")``, with or without a new schema, and ``dal.convert(df, name=...)``) whose
driver is paused after its executors staged the files (``spark-files-staged``) while another writer appends
and is acknowledged. The overwrite fails with ``WriteConflict`` and commits nothing: no new version (in the
catalog or in storage, which ``dal sync`` would record), the newest version holds exactly the acknowledged
rows by id, every version's files are there, the files it staged are gone once ``dal gc`` runs, and the
dataset takes writes afterwards. An overwrite whose base nobody changed commits as before."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import dal
from dal import errors
from dal.catalog import Catalog
from tests.faults.conftest import SQLITE_ONLY
from tests.faults.races import NEW, SCHEMA, check, data, files_below, ids_of
from tests.faults.spark_races import complete, frame, in_thread, paused, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.slow, SQLITE_ONLY]  # Spark jobs: not also through dal serve (CI time)

BEFORE = [0, 1, 2]  # the version the overwrite reads
APPENDED = [500, 501]  # the racing append's rows, acknowledged while the overwrite is paused


def _dataset(name: str, fmt: str) -> list[int]:
    extra: dict[str, Any] = {"schema": SCHEMA} if fmt == "petastorm" else {}
    dal.write(data(fmt, BEFORE), name, format=fmt, **extra)
    return list(BEFORE)


def _overwrite(spark: Any, fmt: str, name: str, how: str) -> Callable[[], Any]:
    """The Spark overwrite ``how``: ``write``, ``schema`` (a new column: schema_mode='overwrite') or ``convert``."""
    from pyspark.sql import functions as F

    df = frame(spark, fmt, NEW)
    if how == "convert":
        return lambda: dal.convert(df, name=name, mode="overwrite")
    if how == "schema":
        df = df.withColumn("w", F.col("id") * 2)  # Petastorm: the new TensorSchema inferred from the DataFrame
        return lambda: dal.write(df, name, format=fmt, mode="overwrite", schema_mode="overwrite")
    return lambda: dal.write(df, name, format=fmt, mode="overwrite")


def _delta_spark_present(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a cluster with delta-spark's classes (the real jars cannot be downloaded here): dal.write would hand
    a Delta write to ``df.write.format("delta")``, whose commit knows nothing of the version dal's overwrite
    read."""
    import dal.spark.write

    monkeypatch.setattr(dal.spark.write, "native_source", lambda spark, fmt: fmt.spark_source)


CASES = [
    ("delta", "write", False),
    ("delta", "schema", False),
    ("delta", "convert", False),  # dal.convert writes Delta (the default format): a Petastorm dataset refuses it
    ("delta", "write", True),
    ("delta", "convert", True),
    ("petastorm", "write", False),
    ("petastorm", "schema", False),
]


@pytest.mark.parametrize(("fmt", "how", "native"), CASES)
def test_a_spark_overwrite_overtaken_by_an_append_commits_nothing(
    cat: Catalog, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str, how: str, native: bool
) -> None:
    name = f"sparkow.{fmt}"
    if native:
        _delta_spark_present(monkeypatch)
    ids = _dataset(name, fmt)
    location = cat.get_dataset(name).location
    before = files_below(location)
    overwrite = _overwrite(spark, fmt, name, how)
    marker, release = paused(monkeypatch, tmp_path, "spark-files-staged")
    with in_thread(overwrite) as out:
        try:
            wait_for(marker.exists, out, "paused at spark-files-staged")
            staged = complete(location, before)
            assert staged, "the overwrite staged no file"
            acknowledged = dal.write(data(fmt, APPENDED), name, format=fmt)  # the arrow path: never paused
        finally:
            release.touch()
    monkeypatch.delenv("DAL_TEST_PAUSE")
    assert isinstance(out.get("error"), errors.WriteConflict), out
    expected = sorted([*ids, *APPENDED])
    dal.sync(name)  # a commit the overwrite made in storage would be recorded here
    assert [v.number for v in cat.versions(name)] == [0, acknowledged.number]
    assert cat.get_dataset(name).latest_version == acknowledged.number
    assert ids_of(name) == expected
    assert check(cat, name, expected) == 0  # every version complete; writable; gc keeps the rows
    left = staged & files_below(location)
    assert not left, f"gc left the failed overwrite's staged files: {sorted(left)}"


@pytest.mark.parametrize(("fmt", "native"), [("delta", False), ("delta", True), ("petastorm", False)])
def test_a_spark_overwrite_on_an_unchanged_base_still_commits(
    cat: Catalog, spark: Any, monkeypatch: pytest.MonkeyPatch, fmt: str, native: bool
) -> None:
    name = f"sparkplain.{fmt}"
    if native:
        _delta_spark_present(monkeypatch)
    _dataset(name, fmt)
    hows = ["write", "schema", "convert"] if fmt == "delta" else ["write", "schema"]
    for n, how in enumerate(hows, start=1):
        result = _overwrite(spark, fmt, name, how)()
        number = result.version.number if how == "convert" else result.number
        assert number == n
        assert ids_of(name) == NEW
    assert ids_of(name, 0) == BEFORE
