"""Never publish less than you read: every operation that reads a version and commits a rewrite of it (optimize,
an overwrite with a new schema, a purge followed by a write) against appends that land while it runs. A real
process is paused at each step (``DAL_TEST_PAUSE``) while this process appends and acknowledges rows; then the
rewrite goes on. It either redoes its work on the new version (optimize) or fails with ``WriteConflict``
committing nothing (an overwrite): either way every acknowledged row is in the newest version, counted by id,
and ``dal gc`` afterwards keeps them. And a kill loop: optimize killed at random moments beside a stream of
acknowledged appends."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import dal
from dal import errors
from dal.catalog import Catalog
from dal.ops import lifecycle
from dal.storage import claims
from tests.faults.conftest import ROOT, finish, run_until_paused, start_paused
from tests.faults.races import NOW, SCHEMA, check, data, ids_of

SMALL = 4  # appends of one row each: small files optimize compacts


def _small_files(name: str, fmt: str) -> list[int]:
    extra = {"schema": SCHEMA} if fmt == "petastorm" else {}
    ids = []
    for i in range(SMALL):
        dal.write(data(fmt, [i]), name, format=fmt, **extra)
        ids.append(i)
    return ids


def _optimize_code(name: str) -> str:
    return f"from dal.ops import lifecycle\nprint(lifecycle.optimize({name!r}).version)\n"


OPTIMIZE_POINTS = [
    ("delta", "optimize-read"),
    ("petastorm", "optimize-read"),
    ("petastorm", "petastorm-files-written"),
    ("petastorm", "petastorm-metadata-written"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("fmt", "point"), OPTIMIZE_POINTS)
def test_optimize_overtaken_by_an_append_redoes_its_work_and_loses_nothing(
    cat: Catalog, tmp_path: Path, fmt: str, point: str
) -> None:
    name = f"race.{fmt}"
    ids = _small_files(name, fmt)
    proc, release = start_paused(_optimize_code(name), point, tmp_path)
    try:
        acknowledged = dal.write(data(fmt, [500, 501]), name, format=fmt)  # lands while optimize holds version 3
        assert acknowledged.number == SMALL
    finally:
        out = finish(proc, release)
    compacted = int(out.strip().splitlines()[-1])
    assert compacted == SMALL + 1  # optimize compacted the newest version (the append's), not the one it first read
    assert ids_of(name) == sorted([*ids, 500, 501])
    assert check(cat, name, [*ids, 500, 501]) == 0  # every version complete; gc keeps them


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fmt", "point"),
    [("delta", "intent-registered"), ("petastorm", "intent-registered"), ("petastorm", "petastorm-files-written")],
)
def test_a_schema_overwrite_overtaken_by_an_append_commits_nothing(
    cat: Catalog, tmp_path: Path, fmt: str, point: str
) -> None:
    """An overwrite (here with a new schema) read version V; an append lands; the overwrite must not publish V'
    without the appended rows (nor, Delta, with them under the new schema): WriteConflict, nothing committed."""
    name = f"race.{fmt}"
    ids = _small_files(name, fmt)
    if fmt == "delta":
        code = (
            "import pandas as pd, dal\n"
            f"dal.write(pd.DataFrame({{'name': ['x']}}), {name!r}, mode='overwrite', schema_mode='overwrite')\n"
        )
    else:
        code = (
            "import numpy as np, dal\n"
            "from dal import TensorSchema, TensorField, ScalarCodec\n"
            "s = TensorSchema('T', [TensorField('id', np.int64, (), ScalarCodec()), "
            "TensorField('w', np.int64, (), ScalarCodec())])\n"
            f"dal.write([{{'id': 9, 'w': 1}}], {name!r}, format='petastorm', mode='overwrite', "
            "schema_mode='overwrite', schema=s)\n"
        )
    proc, release = start_paused(code, point, tmp_path)
    try:
        dal.write(data(fmt, [500]), name, format=fmt)
    finally:
        release.touch()
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "WriteConflict" in out.decode(), out.decode()
    assert ids_of(name) == sorted([*ids, 500])
    assert check(cat, name, [*ids, 500]) == 0


def test_an_overwrite_on_an_unchanged_base_still_commits(cat: Catalog) -> None:
    for fmt in ("delta", "petastorm"):
        name = f"plain.{fmt}"
        _small_files(name, fmt)
        dal.write(data(fmt, [7]), name, format=fmt, mode="overwrite")
        assert ids_of(name) == [7]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["delta", "petastorm"])
def test_a_write_after_an_interrupted_purge_is_refused_until_the_purge_is_finished(
    cat: Catalog, tmp_path: Path, fmt: str
) -> None:
    name = f"purged.{fmt}"
    _small_files(name, fmt)
    location = cat.get_dataset(name).location
    code = f"from dal.ops import lifecycle\nlifecycle.drop({name!r}, purge=True)\n"
    run_until_paused(code, "purge-data-deleted", tmp_path)
    with pytest.raises(errors.PurgeUnfinished, match=f"dal drop {name} --purge"):
        dal.write(data(fmt, [1]), name, format=fmt)
    with pytest.raises(errors.PurgeUnfinished):
        lifecycle.optimize(name)
    lifecycle.drop(name, purge=True)  # finishes it
    assert not Path(location).exists()
    v = dal.write(data(fmt, [1]), name, format=fmt, **({"schema": SCHEMA} if fmt == "petastorm" else {}))
    assert v.number == 0 and ids_of(name) == [1]


@pytest.mark.slow
def test_a_purge_stopped_after_the_catalog_entry_went_leaves_the_location_free(cat: Catalog, tmp_path: Path) -> None:
    name = "purged.late"
    _small_files(name, "delta")
    location = cat.get_dataset(name).location
    run_until_paused(
        f"from dal.ops import lifecycle\nlifecycle.drop({name!r}, purge=True)\n", "purge-dropped", tmp_path
    )
    assert claims.read(claims.Location.of(location)).purging  # type: ignore[union-attr]
    assert dal.write(data("delta", [3]), name).number == 0
    assert ids_of(name) == [3]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["delta", "petastorm"])
def test_optimize_killed_at_random_beside_appends_loses_no_acknowledged_row(cat: Catalog, fmt: str) -> None:
    """A kill loop: optimize started and SIGKILLed at a random moment while this process appends; every append
    that returned is in the newest version afterwards (and after a gc)."""
    name = f"killed.{fmt}"
    acknowledged = _small_files(name, fmt)
    rng = random.Random(1234)
    env_code = _optimize_code(name)
    next_id = 1000
    for _round in range(6):
        proc = subprocess.Popen([sys.executable, "-c", env_code], cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # fmt: skip
        deadline = time.monotonic() + rng.uniform(0.3, 2.5)
        while time.monotonic() < deadline:
            dal.write(data(fmt, [next_id]), name, format=fmt)
            acknowledged.append(next_id)
            next_id += 1
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    dal.sync(name)
    assert ids_of(name) == sorted(acknowledged)
    lifecycle.gc(name, keep_last=1, safe_age=NOW)
    assert ids_of(name) == sorted(acknowledged)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["delta", "petastorm"])
@pytest.mark.parametrize("meanwhile", ["drop", "rename"])
def test_optimize_whose_dataset_is_dropped_or_renamed_meanwhile_says_how_to_record_it(
    cat: Catalog, tmp_path: Path, fmt: str, meanwhile: str
) -> None:
    """The compaction is committed when the dataset is dropped (or renamed): optimize does not bring the dropped
    dataset back (its recording used to re-adopt the table at the default location), and names the command that
    records the version (it used to say "not creating 'ds'" after a rename)."""
    name = f"opt.{fmt}"
    _small_files(name, fmt)
    proc, release = start_paused(_optimize_code(name), "rewrite-committed", tmp_path)
    try:
        if meanwhile == "drop":
            lifecycle.drop(name)
        else:
            lifecycle.rename(name, "opt.renamed")
    finally:
        release.touch()
        out, _ = proc.communicate(timeout=120)
    text = out.decode()
    assert proc.returncode != 0 and "CommittedNotRecorded" in text, text
    if meanwhile == "drop":
        assert [d.name for d in cat.list_datasets()] == []  # not brought back
        assert f"dal register {name}" in text
    else:
        assert [d.name for d in cat.list_datasets()] == ["opt.renamed"]
        assert "dal sync opt.renamed" in text
        assert len(dal.sync("opt.renamed")) == 1  # the compaction, recorded under the new name
        assert ids_of("opt.renamed") == list(range(SMALL))
