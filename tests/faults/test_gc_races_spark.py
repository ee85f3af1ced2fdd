"""gc against Spark writes in flight (issue #22), Delta and Petastorm: the issue's case first — an append whose
executors are still staging while ``dal gc --safe-age 4s`` runs (its staged files older than that) — then the
driver paused at every step of the write (``DAL_TEST_PAUSE``, on a thread of this process: the Spark session
is this process's) against gc with ``safe_age`` 0 expiring all but the newest version. No row lost, no
version with a missing file, the dataset still writable; a commit whose staged files vanished publishes
nothing."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import deltalake
import pytest
from click.testing import CliRunner

import dal
from catalog import Catalog
from dal.cli.app import cli
from dal.errors import FormatError
from dal.ops import lifecycle
from tests.faults.races import NEW, NOW, check, files_below, history

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def frame(spark: Any, fmt: str, ids: list[int], block_at: int | None = None, release: Path | None = None) -> Any:
    """A DataFrame of ``ids`` (and, for Petastorm, 2x2 float tensors) in two partitions; with ``block_at``,
    the task computing that id waits until ``release`` exists: a write whose executors are still staging."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    df = spark.createDataFrame([(i,) for i in ids], "id long").repartition(2, "id")
    if block_at is not None:
        gate = str(release)

        def hold(i):  # type: ignore[no-untyped-def]  (no hints: Spark would take it for a pandas UDF)
            import os
            import time

            deadline = time.monotonic() + 300
            while i == block_at and not os.path.exists(gate) and time.monotonic() < deadline:
                time.sleep(0.05)
            return i

        df = df.select(F.udf(hold, T.LongType())("id").alias("id"))
    if fmt == "petastorm":
        x = F.col("id").cast("float")
        df = df.select("id", F.array(F.array(x, x), F.array(x, x)).alias("depth"))
    return df


@contextmanager
def in_thread(fn: Callable[[], Any]) -> Iterator[dict[str, Any]]:
    """Run ``fn`` on a thread for the block; its result (or error) once the block ends."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    out["thread"] = t
    try:
        yield out
    finally:
        t.join(timeout=300)
        assert not t.is_alive(), "the write did not finish"


def wait_for(condition: Callable[[], bool], out: dict[str, Any], what: str) -> None:
    deadline = time.monotonic() + 300
    while not condition():
        assert "error" not in out, out.get("error")
        assert out["thread"].is_alive() or condition(), f"the write ended before {what}: {out}"
        assert time.monotonic() < deadline, f"never {what}"
        time.sleep(0.05)


def complete(root: str, before: set[str]) -> set[str]:
    """The Parquet files below ``root`` not in ``before`` whose writer closed them (the footer's magic is there)."""
    out = set()
    for rel in files_below(root) - before:
        path = Path(root, rel)
        if rel.endswith(".parquet") and path.stat().st_size > 8:
            with open(path, "rb") as f:
                f.seek(-4, os.SEEK_END)
                if f.read() == b"PAR1":
                    out.add(rel)
    return out


def age(paths: set[str], root: str, seconds: float) -> None:
    then = time.time() - seconds
    for rel in paths:
        os.utime(Path(root, rel), (then, then))


@pytest.mark.parametrize("fmt", ["delta", "petastorm"])
def test_gc_while_spark_executors_stage_an_append(cat: Catalog, spark: Any, tmp_path: Path, fmt: str) -> None:
    """The issue's reproduction: one task staged its files (aged past gc's safe age, as in a long job), the
    other still computes; ``dal gc --safe-age 4s`` runs; then the write finishes and commits."""
    name = f"staging.{fmt}"
    before = history(name, fmt)
    location = cat.get_dataset(name).location
    committed = files_below(location)
    release = tmp_path / "release"
    rows = list(range(1000, 1200))
    df = frame(spark, fmt, rows, block_at=max(rows), release=release)
    with in_thread(lambda: dal.write(df, name, format=fmt)) as out:
        try:
            wait_for(lambda: bool(complete(location, committed)), out, "staged")
            staged = complete(location, committed)
            age(staged, location, 13)  # staged 13 s ago: older than --safe-age 4s
            env = {"DAL_CATALOG_URL": cat.url}
            done = CliRunner().invoke(cli, ["gc", name, "--safe-age", "4s", "--json"], env=env)
            assert done.exit_code == 0, done.output
            assert staged <= files_below(location), "gc deleted files of the running write"
        finally:
            release.touch()
    assert "error" not in out, out.get("error")
    assert check(cat, name, [*before, *rows]) == 0


def paused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, point: str) -> tuple[Path, Path]:
    marker, release = tmp_path / f"paused-{uuid.uuid4().hex[:8]}", tmp_path / f"release-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("DAL_TEST_PAUSE", point)
    monkeypatch.setenv("DAL_TEST_PAUSE_FILE", str(marker))
    monkeypatch.setenv("DAL_TEST_RELEASE_FILE", str(release))
    return marker, release


POINTS = [
    ("delta", "intent-registered"),
    ("delta", "spark-files-staged"),
    ("delta", "after-storage-commit"),
    ("petastorm", "intent-registered"),
    ("petastorm", "spark-files-staged"),
    ("petastorm", "petastorm-metadata-written"),
    ("petastorm", "record-written"),
    ("petastorm", "after-storage-commit"),
]


@pytest.mark.parametrize(("fmt", "point"), POINTS)
def test_gc_against_a_spark_write_paused_at_each_step_loses_nothing(
    cat: Catalog, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str, point: str
) -> None:
    name = f"sparkrace.{fmt}"
    before = history(name, fmt)
    location = cat.get_dataset(name).location
    marker, release = paused(monkeypatch, tmp_path, point)
    df = frame(spark, fmt, NEW)
    with in_thread(lambda: dal.write(df, name, format=fmt)) as out:
        try:
            wait_for(marker.exists, out, f"paused at {point}")
            staged = {f for f in files_below(location) if f.endswith(".parquet")}
            age(staged, location, 7200)  # and old: only the intent protects what the write staged
            lifecycle.gc(name, keep_last=1, safe_age=NOW)
        finally:
            release.touch()
    monkeypatch.delenv("DAL_TEST_PAUSE")
    assert "error" not in out, out.get("error")
    assert check(cat, name, [*before, *NEW]) == 0


@pytest.mark.parametrize("fmt", ["delta", "petastorm"])
def test_a_spark_commit_whose_staged_files_vanished_publishes_nothing(
    cat: Catalog, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    name = f"sparkvanish.{fmt}"
    before = history(name, fmt)
    location = cat.get_dataset(name).location
    committed = files_below(location)
    marker, release = paused(monkeypatch, tmp_path, "spark-files-staged")
    with in_thread(lambda: dal.write(frame(spark, fmt, NEW), name, format=fmt)) as out:
        try:
            wait_for(marker.exists, out, "staged")
            staged = sorted(f for f in files_below(location) - committed if f.endswith(".parquet"))
            Path(location, staged[0]).unlink()  # deleted behind the write's back (an older gc, a person)
        finally:
            release.touch()
    monkeypatch.delenv("DAL_TEST_PAUSE")
    assert isinstance(out.get("error"), FormatError), out
    assert "are gone" in str(out["error"]) and "nothing was committed" in str(out["error"])
    assert [v.number for v in cat.versions(name)] == [0, 1, 2]
    if fmt == "delta":
        assert deltalake.DeltaTable(location).version() == 2
    else:
        assert sorted(p.name for p in Path(location, "_dal_versions").iterdir())[-1] == f"{2:020d}.json"
    assert check(cat, name, before) == 0
