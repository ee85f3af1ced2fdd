"""Every destructive operation, run in a canary sandbox (local disk and the S3 emulator), deletes what it exists
to delete and leaves every canary's tree hash unchanged: gc and ``drop --purge`` (Delta, Petastorm), ``dal cache
clear`` (converter and file cache), the converter's sweep at ``begin``, the abandoned-folder cleanup, file cache
eviction, and the Petastorm directory cleanup (stale temporary records, an aborted write's directory)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

import dal
from dal.catalog import Catalog
from dal.cli.app import cli
from dal.errors import DalError
from dal.formats.petastorm.format import PetastormFormat
from dal.ops import lifecycle
from dal.spark import convert_cache
from dal.storage import rangecache
from dal.storage.location import Location
from tests.ownership.canaries import DEAD, DEAD_KEY, KEY, OLD, S3Sandbox, Sandbox, local_world, s3_world

NO_AGE = timedelta(0)


@pytest.fixture
def local(sqlite_env: Catalog, tmp_path: Path) -> Sandbox:
    return local_world(Sandbox(tmp_path / "sandbox"))


def _cli(*args: str) -> str:
    r = CliRunner().invoke(cli, list(args))
    assert r.exit_code == 0, r.output
    return r.output


def _gone(path: Path) -> bool:
    return not os.path.lexists(path)


def op_gc_delta(w: Sandbox) -> None:
    r = lifecycle.gc("c.delta", keep_last=1, safe_age=NO_AGE)
    assert r.deleted and r.not_followed == ("date=2099-01-01",)
    assert dal.open("c.delta").to_arrow().column("id").to_pylist() == [2, 3]


def op_gc_petastorm(w: Sandbox) -> None:
    r = lifecycle.gc("c.pet", keep_last=1, safe_age=NO_AGE)
    assert r.deleted and any(n.endswith("/shared") for n in r.not_followed)


def op_purge_delta(w: Sandbox) -> None:
    with pytest.raises(DalError, match="nothing was deleted"):
        lifecycle.drop("c.delta", purge=True)
    assert lifecycle.drop("c.delta", purge=True, force=True).deleted


def op_purge_petastorm(w: Sandbox) -> None:
    assert lifecycle.drop("c.pet", purge=True, force=True).deleted


def op_cache_clear(w: Sandbox) -> None:
    out = _cli("cache", "clear", "--dir", str(w.base / "cache"), "--force")
    assert "removed 1 cached conversion" in out and _gone(w.base / "cache" / f"{DEAD_KEY}-deadbeef0000")


def op_cache_clear_elsewhere(w: Sandbox) -> None:
    for where in (w.base, w.base / "ds.delta", w.base / "filecache", w.base / "outside", w.base / "precious"):
        r = CliRunner().invoke(cli, ["cache", "clear", "--dir", str(where), "--force"])
        assert r.exit_code != 0 and "nothing was deleted" in r.output, where
        r = CliRunner().invoke(cli, ["cache", "clear", "--files", "--dir", str(where)])
        assert r.exit_code != 0 or where == w.base / "filecache", where


def op_converter_sweep(w: Sandbox) -> None:
    convert_cache.begin(w.base / "cache", KEY)  # what every conversion does first
    assert _gone(w.base / "cache" / f"{DEAD_KEY}-deadbeef0000")


def op_abandoned_cleanup(w: Sandbox) -> None:
    assert [p.name for p in convert_cache.sweep(w.base / "cache")] == [f"{DEAD_KEY}-deadbeef0000"]


def op_filecache_clear(w: Sandbox) -> None:
    assert "removed 100 bytes" in _cli("cache", "clear", "--files", "--dir", str(w.base / "filecache"))


def op_filecache_evict(w: Sandbox) -> None:
    cache = rangecache.FileCache.create(str(w.base / "filecache"), "1MB")
    assert rangecache._store(cache.root).evict(limit=1, incoming=1, protect_since=time.time()) == 0
    assert rangecache.usage(cache.root) == 0


def op_petastorm_cleanup(w: Sandbox) -> None:
    where = w.base / "ds.petastorm"
    stale = where / "_dal_versions" / ".00000000000000000009.json.0123456789ab.tmp"
    stale.write_text("{}")
    os.utime(stale, (OLD, OLD))
    fmt = PetastormFormat()
    directory = fmt.start(str(where))  # a write starting sweeps stale temporary records
    Location.of(str(where)).write(f"{directory}/part-0.parquet", b"half")
    fmt.abort(str(where), directory)  # a failed write removes its own directory
    assert _gone(stale) and _gone(where / directory)


LOCAL_OPS: dict[str, Callable[[Sandbox], None]] = {
    name.removeprefix("op_"): fn for name, fn in dict(globals()).items() if name.startswith("op_")
}


@pytest.mark.parametrize("op", sorted(LOCAL_OPS))
def test_a_destructive_operation_touches_no_canary(op: str, local: Sandbox) -> None:
    LOCAL_OPS[op](local)
    assert local.touched() == []
    convert_cache.release_all()


# -- the S3 emulator -----------------------------------------------------------------------------------------


@pytest.fixture
def remote(
    s3: tuple[str, dict[str, str]], sqlite_env: Catalog, monkeypatch: pytest.MonkeyPatch
) -> tuple[S3Sandbox, str, dict[str, str]]:
    bucket, options = s3
    # objects cannot be backdated on S3: every object counts as old, as a canary an hour old would
    monkeypatch.setattr(convert_cache, "STARTING_GRACE_S", 0.0)
    sb = S3Sandbox(bucket, options)
    return sb, s3_world(sb, "area"), options


def s3_gc(base: str, options: dict[str, str]) -> None:
    assert lifecycle.gc("c.delta", keep_last=1, safe_age=NO_AGE, storage_options=options).deleted
    assert lifecycle.gc("c.pet", keep_last=1, safe_age=NO_AGE, storage_options=options).deleted
    assert dal.open("c.delta", storage_options=options).to_arrow().column("id").to_pylist() == [2, 3]


def s3_purge(base: str, options: dict[str, str]) -> None:
    with pytest.raises(DalError, match="nothing was deleted"):
        lifecycle.drop("c.delta", purge=True, storage_options=options)
    assert lifecycle.drop("c.delta", purge=True, force=True, storage_options=options).deleted
    assert lifecycle.drop("c.pet", purge=True, force=True, storage_options=options).deleted


def s3_cache_clear(base: str, options: dict[str, str]) -> None:
    removed, _ = convert_cache.remote_clear(Location.of(f"{base}/cache", options), force=True)
    assert len(removed) == 1


def s3_sweep(base: str, options: dict[str, str]) -> None:
    root = Location.of(f"{base}/cache", options)
    convert_cache.remote_begin(root, KEY)  # what every conversion does first
    assert not root.exists(f"{DEAD_KEY}-deadbeef0000/users/{DEAD}")


def s3_elsewhere(base: str, options: dict[str, str]) -> None:
    bucket = base.split("/")[2]
    for uri in (f"s3://{bucket}", base, f"{base}/ds.delta", f"s3://{bucket}/precious"):
        with pytest.raises(DalError, match="nothing was deleted"):
            convert_cache.remote_clear(Location.of(uri, options), force=True)


S3_OPS = {"gc": s3_gc, "purge": s3_purge, "cache_clear": s3_cache_clear, "sweep": s3_sweep, "elsewhere": s3_elsewhere}


@pytest.mark.parametrize("op", sorted(S3_OPS))
def test_a_destructive_operation_on_s3_touches_no_canary(
    op: str, remote: tuple[S3Sandbox, str, dict[str, str]]
) -> None:
    sb, base, options = remote
    S3_OPS[op](base, options)
    assert sb.touched() == []
    convert_cache.release_all()
