"""One table, one catalog, attacked: ways a second catalog (or a second process) could delete in a location
another catalog claims, or lose rows a write acknowledged. Real SQLite and PostgreSQL catalogs, real files,
real processes where timing matters."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dal
from dal import errors
from dal.ops import lifecycle
from dal.ops.claim import claim
from dal.storage import claims
from dal.storage.location import Location
from tests.faults.conftest import finish, run_until_paused, start_paused

SCHEMA = dal.TensorSchema("S", [dal.TensorField("id", np.int64, (), dal.ScalarCodec())])
FORMATS = ["delta", "petastorm"]


@pytest.fixture(autouse=True)
def _close_catalogs() -> Iterator[None]:
    yield
    for cat in dal.api._catalogs.values():
        cat.close()
    dal.api._catalogs.clear()


def _write(ids: list[int], name: str, url: str, fmt: str, **kw: object) -> dal.VersionInfo:
    extra = {"schema": SCHEMA} if fmt == "petastorm" else {}
    return dal.write(pd.DataFrame({"id": ids}), name, format=fmt, catalog=url, **extra, **kw)  # type: ignore[arg-type]


def _ids(name: str, url: str) -> list[int]:
    return sorted(dal.open(name, catalog=url).to_pandas()["id"].tolist())


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def other_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A second catalog: another SQLite file, or a team's PostgreSQL catalog."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/other.db"
    return str(request.getfixturevalue("pg_url"))


# -- a location inside another catalog's location -----------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_gc_of_an_outer_location_leaves_a_nested_location_another_catalog_claims(
    tmp_path: Path, other_url: str, fmt: str
) -> None:
    """Catalog A's dataset lives at w/outer; catalog B's at w/outer/inner (claimed by B). A's gc lists its
    location recursively: B's data files are files no version of A references, and were deleted."""
    a = f"sqlite:///{tmp_path}/a.db"
    outer, inner = tmp_path / "w" / "outer", tmp_path / "w" / "outer" / "inner"
    _write([1, 2], "o.t", a, fmt, path=str(outer))
    _write([10, 20], "i.t", other_url, fmt, path=str(inner))
    _write([30], "i.t", other_url, fmt)
    claim = claims.read(Location.of(str(inner)))
    assert claim is not None and claim.catalog == dal.get_catalog(other_url).catalog_id

    lifecycle.gc("o.t", keep_last=1, safe_age=timedelta(0), catalog=a)

    assert _ids("i.t", other_url) == [10, 20, 30]
    assert dal.open("i.t", 0, catalog=other_url).to_pandas()["id"].tolist() == [10, 20]


@pytest.mark.parametrize("fmt", FORMATS)
def test_purge_of_an_outer_location_leaves_a_nested_location_another_catalog_claims(
    tmp_path: Path, other_url: str, fmt: str
) -> None:
    """``drop --purge --force`` of the outer dataset deletes only its own files: the nested location is
    another catalog's, listed as left behind (and without --force the purge is refused)."""
    a = f"sqlite:///{tmp_path}/a.db"
    outer, inner = tmp_path / "w" / "outer", tmp_path / "w" / "outer" / "inner"
    _write([1, 2], "o.t", a, fmt, path=str(outer))
    _write([10, 20], "i.t", other_url, fmt, path=str(inner))

    with pytest.raises(errors.DalError, match="inner/"):
        lifecycle.drop("o.t", purge=True, catalog=a)
    dropped = lifecycle.drop("o.t", purge=True, force=True, catalog=a)

    assert "inner/" in dropped.left
    assert not any(rel.startswith("inner/") for rel in dropped.deleted)
    assert _ids("i.t", other_url) == [10, 20]
    _write([30], "i.t", other_url, fmt)  # B still owns and writes its location
    assert _ids("i.t", other_url) == [10, 20, 30]


def test_gc_of_an_outer_location_leaves_a_nested_delta_table_no_catalog_claims(tmp_path: Path) -> None:
    """A Delta table another tool (delta-rs here, Spark alike) keeps inside a dal dataset's folder is not dal's:
    its Parquet files match what a Delta table of dal owns, and the outer gc deleted them."""
    import deltalake
    import pyarrow as pa

    a = f"sqlite:///{tmp_path}/a.db"
    outer = tmp_path / "w" / "outer"
    _write([1, 2], "o.t", a, "delta", path=str(outer))
    deltalake.write_deltalake(str(outer / "ext"), pa.table({"id": [5, 6]}))

    lifecycle.gc("o.t", keep_last=1, safe_age=timedelta(0), catalog=a)

    assert sorted(deltalake.DeltaTable(str(outer / "ext")).to_pyarrow_table()["id"].to_pylist()) == [5, 6]


# -- a purge stopped half-way, then a plain drop -------------------------------------------------------------


PURGE = "from dal.ops import lifecycle; lifecycle.drop({name!r}, purge=True, catalog={url!r})"


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_plain_drop_does_not_release_the_claim_of_a_purge_stopped_half_way(tmp_path: Path, fmt: str) -> None:
    """A purge killed after deleting the data files (``purge-data-deleted``) leaves the commit records and a
    ``purging`` claim: writes are refused until the purge is finished. A plain ``drop`` released that claim,
    and the next write of the name at that path adopted the log whose data files were gone and committed on
    top of it: an acknowledged version no read could serve."""
    a = f"sqlite:///{tmp_path}/a.db"
    loc = tmp_path / "w" / "t"
    _write([1, 2], "x.t", a, fmt, path=str(loc))
    _write([3], "x.t", a, fmt)
    run_until_paused(PURGE.format(name="x.t", url=a), "purge-data-deleted", tmp_path)
    claim = claims.read(Location.of(str(loc)))
    assert claim is not None and claim.purging

    with pytest.raises(errors.PurgeUnfinished, match="--purge"):
        lifecycle.drop("x.t", catalog=a)
    with pytest.raises(errors.PurgeUnfinished):
        _write([9], "x.t", a, fmt, path=str(loc))

    lifecycle.drop("x.t", purge=True, catalog=a)  # finishing the purge frees the location
    assert not loc.exists() or not any(loc.iterdir())
    _write([9], "x.t", a, fmt, path=str(loc))
    assert _ids("x.t", a) == [9]


def test_a_purging_claim_is_not_taken_over(tmp_path: Path) -> None:
    """Catalog A's purge is paused after deleting the data files; catalog B (a read-only registration) took the
    claim over (the ``purging`` mark went with it), wrote a version on the log whose data was gone, and A's purge
    then went on deleting log entries in B's location: B's acknowledged version could not be read."""
    a, b = f"sqlite:///{tmp_path}/a.db", f"sqlite:///{tmp_path}/b.db"
    loc = tmp_path / "w" / "t"
    _write([1, 2], "x.t", a, "delta", path=str(loc))
    dal.register("x.t", str(loc), read_only=True, catalog=b)
    proc, release = start_paused(PURGE.format(name="x.t", url=a), "purge-data-deleted", tmp_path)
    try:
        with pytest.raises(errors.PurgeUnfinished, match="--purge"):
            claim("x.t", take_over=True, catalog=b)
        with pytest.raises(errors.ReadOnlyDataset):
            _write([9], "x.t", b, "delta")
    finally:
        finish(proc, release)
    assert claims.read(Location.of(str(loc))) is None  # A's purge finished and released it
    assert claim("x.t", take_over=True, catalog=b).ours  # a finished purge leaves the location free


# -- never publish less than you read: an overwrite that began before the table existed ----------------------


OVERWRITE = (
    "import dal, numpy as np, pandas as pd\n"
    "S = dal.TensorSchema('S', [dal.TensorField('id', np.int64, (), dal.ScalarCodec())])\n"
    "extra = {{'schema': S}} if {fmt!r} == 'petastorm' else {{}}\n"
    "try:\n"
    "    dal.write(pd.DataFrame({{'id': [100]}}), 'x.t', format={fmt!r}, mode='overwrite', catalog={url!r}, **extra)\n"
    "    print('COMMITTED')\n"
    "except dal.errors.WriteConflict as e:\n"
    "    print('CONFLICT', e)\n"
)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_first_overwrite_overtaken_by_a_first_append_is_a_conflict(
    tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An overwrite of a dataset that has no table yet begins; an append creates the table and is acknowledged;
    the overwrite then committed on top of it (Delta), dropping the append's rows from the newest version. It
    read no version, so it must commit only while there is none (as Petastorm's does)."""
    a = f"sqlite:///{tmp_path}/a.db"
    monkeypatch.setenv("DAL_WAREHOUSE", str(tmp_path / "wh"))  # the writer process inherits it
    proc, release = start_paused(OVERWRITE.format(fmt=fmt, url=a), "intent-registered", tmp_path)
    assert _write([1, 2], "x.t", a, fmt).number == 0  # acknowledged
    out = finish(proc, release)

    assert "CONFLICT" in out, out
    assert _ids("x.t", a) == [1, 2]


# -- one table, two spellings, one catalog ------------------------------------------------------------------


def test_one_s3_table_under_two_spellings_is_one_writable_dataset_per_catalog(
    s3: tuple[str, dict[str, str]], sqlite_env: object
) -> None:
    bucket, opts = s3
    dal.write(pd.DataFrame({"id": [1, 2]}), "a.t", path=f"s3://{bucket}/t", storage_options=opts)
    dal.write(pd.DataFrame({"id": [3]}), "a.t", mode="overwrite", storage_options=opts)
    try:
        dal.register("b.t", f"s3a://{bucket}/t", storage_options=opts)
    except errors.DatasetExists:
        return  # refused: one writable entry per table
    lifecycle.gc("a.t", keep_last=1, safe_age=timedelta(0), storage_options=opts)
    assert dal.open("b.t", 0, storage_options=opts).to_pandas()["id"].tolist() == [1, 2]


GC = "from datetime import timedelta; from dal.ops import lifecycle; lifecycle.gc({name!r}, keep_last=1, safe_age=timedelta(0), catalog={url!r})"


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_take_over_during_a_running_gc_stops_its_deletes(tmp_path: Path, fmt: str) -> None:
    """Catalog A's gc expired versions 0 and 1 and is paused before deleting their files; catalog B takes the
    location over, keeping those versions. A's gc must not then delete files B's versions pin: before, it did,
    and B's version 0 could no longer be read."""
    a, b = f"sqlite:///{tmp_path}/a.db", f"sqlite:///{tmp_path}/b.db"
    loc = tmp_path / "w" / "t"
    for i in range(3):
        _write([i], "x.t", a, fmt, path=str(loc), mode="overwrite" if i else "append")
    dal.register("x.t", str(loc), format=fmt, read_only=True, catalog=b)
    proc, release = start_paused(GC.format(name="x.t", url=a), "gc-expired", tmp_path)
    try:
        assert claim("x.t", take_over=True, catalog=b).ours
    finally:
        release.touch()
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "ClaimedElsewhere" in out.decode(), out.decode()
    assert sorted(dal.open("x.t", 0, catalog=b).to_pandas()["id"].tolist()) == [0]  # B's pinned files are there
    assert _ids("x.t", b) == [2]
