"""The issue's case (#22): a Spark append whose executors are still staging while ``dal gc --safe-age 4s`` runs,
its staged files older than that — gc keeps them and the write commits complete; and a Spark commit whose staged
files vanished (deleted behind its back) publishes nothing, Delta and Petastorm."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import deltalake
import pytest
from click.testing import CliRunner

import dal
from dal.catalog import Catalog
from dal.cli.app import cli
from dal.errors import FormatError
from tests.faults.conftest import SQLITE_ONLY
from tests.faults.races import NEW, check, files_below, history
from tests.faults.spark_races import age, complete, frame, in_thread, paused, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.slow, SQLITE_ONLY]  # Spark jobs: not also through dal serve (CI time)


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
