"""gc against writes streaming their files (issue #22): delta-rs writing (and naming) files while an Arrow
stream still flows, locally and on S3 (moto), and Petastorm writes paused on S3: the live intent claims the
files, gc with ``safe_age`` 0 keeps them, nothing is lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from dal.catalog import Catalog
from dal.ops import lifecycle
from dal.storage import intents
from dal.storage.location import Location
from tests.faults.conftest import finish, start_paused
from tests.faults.races import (
    NEW,
    NOW,
    STREAMED,
    check,
    files_below,
    history,
    ids_of,
    missing_files,
    stream_writer,
    writer_code,
)


@pytest.mark.slow
def test_files_delta_rs_writes_mid_stream_are_kept(cat: Catalog, tmp_path: Path) -> None:
    """delta-rs names its files itself (no token): the live intent claims every file modified since it began."""
    before = history("race.stream", "delta")
    location = cat.get_dataset("race.stream").location
    committed = files_below(location)
    proc, release = start_paused(stream_writer("race.stream"), "stream-paused", tmp_path)
    try:
        staged = {f for f in files_below(location) - committed if f.endswith(".parquet")}
        assert staged, "delta-rs wrote files before the stream ended"
        result = lifecycle.gc("race.stream", keep_last=1, safe_age=NOW)
        assert not staged & set(result.deleted)
    finally:
        finish(proc, release)
    assert check(cat, "race.stream", [*before, *STREAMED]) == 0


@pytest.mark.slow
def test_files_delta_rs_writes_mid_stream_on_s3_are_kept(
    sqlite_env: Catalog, s3: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The same on S3: the marker's time and the files' times are both the store's (whole seconds there)."""
    bucket, options = s3
    monkeypatch.setenv("DAL_WAREHOUSE", f"s3://{bucket}/wh")
    before = history("s3race.stream", "delta", options)
    loc = Location.of(sqlite_env.get_dataset("s3race.stream").location, options)
    committed = {rel for rel, _s in loc.list()}
    env = {"DAL_WAREHOUSE": f"s3://{bucket}/wh"}
    proc, release = start_paused(stream_writer("s3race.stream", options), "stream-paused", tmp_path, env)
    try:
        staged = {rel for rel, _s in loc.list() if rel.endswith(".parquet")} - committed
        assert staged, "delta-rs wrote files before the stream ended"
        result = lifecycle.gc("s3race.stream", keep_last=1, safe_age=NOW, storage_options=options)
        assert not staged & set(result.deleted)
    finally:
        finish(proc, release)
    assert check(sqlite_env, "s3race.stream", [*before, *STREAMED], options) == 0


@pytest.mark.slow
@pytest.mark.parametrize("point", ["petastorm-files-written", "petastorm-metadata-written"])
def test_gc_against_a_paused_petastorm_write_on_s3(
    sqlite_env: Catalog, s3: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, point: str
) -> None:
    bucket, options = s3
    monkeypatch.setenv("DAL_WAREHOUSE", f"s3://{bucket}/wh")
    before = history("s3race.p", "petastorm", options)
    loc = Location.of(sqlite_env.get_dataset("s3race.p").location, options)
    env = {"DAL_WAREHOUSE": f"s3://{bucket}/wh"}
    proc, release = start_paused(writer_code("s3race.p", "petastorm", NEW, options), point, tmp_path, env)
    try:
        assert [rel for rel, _s in loc.list(intents.DIR)], "the intent is on the bucket"
        lifecycle.gc("s3race.p", keep_last=1, safe_age=NOW, storage_options=options)
    finally:
        finish(proc, release)
    assert check(sqlite_env, "s3race.p", [*before, *NEW], options) == 0
    assert not list(loc.list(intents.DIR))
    assert ids_of("s3race.p", options=options) == sorted([*before, *NEW, 5000])
    assert missing_files("s3race.p", 4, options) == []
