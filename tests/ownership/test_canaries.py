"""Every destructive operation, run in a canary sandbox (local disk and the S3 emulator), deletes what it exists
to delete and leaves every canary's tree hash unchanged: gc and ``drop --purge`` (Delta, Petastorm), ``dal cache
clear`` (converter and file cache), the converter's sweep at ``begin``, the abandoned-folder cleanup, file cache
eviction, and the Petastorm directory cleanup (stale temporary records, an aborted write's directory)."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner

import dal
from catalog import Catalog
from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema
from dal.cli.app import cli
from dal.errors import DalError
from dal.formats.petastorm.format import PetastormFormat
from dal.ops import lifecycle
from dal.spark import convert_cache
from dal.storage import rangecache
from dal.storage.location import Location
from tests.ownership.canaries import OLD, S3Sandbox, Sandbox

SCHEMA = TensorSchema(
    "S", [TensorField("id", np.int64, (), ScalarCodec()), TensorField("x", np.float32, (2,), NdarrayCodec())]
)
KEY = "0123456789abcdef" * 2 + "01234567"
DEAD_KEY = "89abcdef01234567" * 2 + "89abcdef"
DEAD = f"{socket.gethostname()}-{2**22 + 4321}"  # a pid no process has
NO_AGE = timedelta(0)


def petastorm_rows(start: int) -> list[dict[str, object]]:
    return [{"id": i, "x": np.full(2, i, np.float32)} for i in range(start, start + 3)]


def write_history(base: str, options: dict[str, str] | None = None) -> None:
    """Two datasets with old versions (overwrites: their files are garbage once expired) and a neighbour."""
    for i in range(3):
        mode = "overwrite" if i else "append"
        dal.write(pa.table({"id": [i, i + 1]}), "c.delta", path=f"{base}/ds.delta", mode=mode, storage_options=options)
    for i in range(2):
        dal.write(petastorm_rows(i), "c.pet", format="petastorm", schema=SCHEMA, path=f"{base}/ds.petastorm",
                  mode="overwrite" if i else "append", storage_options=options)  # fmt: skip
    # a second dataset sharing the parent folder
    dal.write(pa.table({"id": [7]}), "c.other", path=f"{base}/other.delta", storage_options=options)


@dataclass
class Local:
    sb: Sandbox
    cat: Catalog

    @property
    def base(self) -> Path:
        return self.sb.base


@pytest.fixture
def local(sqlite_env: Catalog, tmp_path: Path) -> Local:
    sb = Sandbox(tmp_path / "sandbox")
    write_history(str(sb.base))
    sb.watch(sb.base / "other.delta")
    for ds in ("ds.delta", "ds.petastorm"):
        sb.plant_inside(sb.base / ds)
    sb.link(sb.base / "ds.delta" / "date=2099-01-01", sb.outside)
    v0 = next(p for p in (sb.base / "ds.petastorm").iterdir() if p.name.startswith("v0-"))
    sb.link(v0 / "shared", sb.base / "projectA")
    # the converter cache: a published entry, an abandoned one, canaries and a link inside
    cache = convert_cache.cache_root(str(sb.base / "cache"))
    folder = convert_cache.begin(cache, KEY)
    (folder / "catalog.db").write_text("complete")
    convert_cache.publish(cache, KEY, folder, rows=1)
    dead = cache / f"{DEAD_KEY}-deadbeef0000"
    (dead / "table").mkdir(parents=True)
    (dead / "users").mkdir()
    (dead / "users" / DEAD).touch()
    os.utime(dead, (OLD, OLD))
    sb.plant_inside(cache)
    sb.link(cache / f"{DEAD_KEY}-0123456789ab", sb.outside)
    # the file cache: one range, canaries and links inside
    files = sb.base / "filecache"
    rangecache.FileCache.create(str(files), "1MB")
    rng = files / "v1" / "0f" / ("0" * 64) / "0-100"
    rng.parent.mkdir(parents=True)
    rng.write_bytes(b"r" * 100)
    os.utime(rng, (OLD, OLD))
    sb.plant_inside(files)
    sb.link(files / "v1" / "1f", sb.outside)
    return Local(sb, sqlite_env)


def _cli(*args: str) -> str:
    r = CliRunner().invoke(cli, list(args))
    assert r.exit_code == 0, r.output
    return r.output


def _gone(path: Path) -> bool:
    return not os.path.lexists(path)


def op_gc_delta(w: Local) -> None:
    r = lifecycle.gc("c.delta", keep_last=1, safe_age=NO_AGE)
    assert r.deleted and r.not_followed == ("date=2099-01-01",)
    assert dal.open("c.delta").to_arrow().column("id").to_pylist() == [2, 3]


def op_gc_petastorm(w: Local) -> None:
    r = lifecycle.gc("c.pet", keep_last=1, safe_age=NO_AGE)
    assert r.deleted and any(n.endswith("/shared") for n in r.not_followed)


def op_purge_delta(w: Local) -> None:
    with pytest.raises(DalError, match="nothing was deleted"):
        lifecycle.drop("c.delta", purge=True)
    assert lifecycle.drop("c.delta", purge=True, force=True).deleted


def op_purge_petastorm(w: Local) -> None:
    assert lifecycle.drop("c.pet", purge=True, force=True).deleted


def op_cache_clear(w: Local) -> None:
    out = _cli("cache", "clear", "--dir", str(w.base / "cache"), "--force")
    assert "removed 1 cached conversion" in out and _gone(w.base / "cache" / f"{DEAD_KEY}-deadbeef0000")


def op_cache_clear_elsewhere(w: Local) -> None:
    for where in (w.base, w.base / "ds.delta", w.base / "filecache", w.base / "outside", w.base / "precious"):
        r = CliRunner().invoke(cli, ["cache", "clear", "--dir", str(where), "--force"])
        assert r.exit_code != 0 and "nothing was deleted" in r.output, where
        r = CliRunner().invoke(cli, ["cache", "clear", "--files", "--dir", str(where)])
        assert r.exit_code != 0 or where == w.base / "filecache", where


def op_converter_sweep(w: Local) -> None:
    convert_cache.begin(w.base / "cache", KEY)  # what every conversion does first
    assert _gone(w.base / "cache" / f"{DEAD_KEY}-deadbeef0000")


def op_abandoned_cleanup(w: Local) -> None:
    assert [p.name for p in convert_cache.sweep(w.base / "cache")] == [f"{DEAD_KEY}-deadbeef0000"]


def op_filecache_clear(w: Local) -> None:
    assert "removed 100 bytes" in _cli("cache", "clear", "--files", "--dir", str(w.base / "filecache"))


def op_filecache_evict(w: Local) -> None:
    cache = rangecache.FileCache.create(str(w.base / "filecache"), "1MB")
    assert rangecache._store(cache.root).evict(limit=1, incoming=1, protect_since=time.time()) == 0
    assert rangecache.usage(cache.root) == 0


def op_petastorm_cleanup(w: Local) -> None:
    where = w.base / "ds.petastorm"
    stale = where / "_dal_versions" / ".00000000000000000009.json.0123456789ab.tmp"
    stale.write_text("{}")
    os.utime(stale, (OLD, OLD))
    fmt = PetastormFormat()
    directory = fmt.start(str(where))  # a write starting sweeps stale temporary records
    Location.of(str(where)).write(f"{directory}/part-0.parquet", b"half")
    fmt.abort(str(where), directory)  # a failed write removes its own directory
    assert _gone(stale) and _gone(where / directory)


LOCAL_OPS: dict[str, Callable[[Local], None]] = {
    name.removeprefix("op_"): fn for name, fn in dict(globals()).items() if name.startswith("op_")
}


@pytest.mark.parametrize("op", sorted(LOCAL_OPS))
def test_a_destructive_operation_touches_no_canary(op: str, local: Local) -> None:
    LOCAL_OPS[op](local)
    assert local.sb.touched() == []
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
    base = f"s3://{bucket}/area"
    write_history(base, options)
    for key in sb.keys(bucket, "area/other.delta/"):
        sb.watch(bucket, key)
    for ds in ("ds.delta", "ds.petastorm"):
        sb.plant_inside(f"area/{ds}")
    root = convert_cache.remote_root(f"{base}/cache", options)
    folder = convert_cache.remote_begin(root, KEY)
    root.write(f"{folder}/table/part-0.parquet", b"x")
    convert_cache.remote_publish(root, KEY, folder, rows=1)
    root.write(f"{DEAD_KEY}-deadbeef0000/table/_delta_log/00000000000000000000.json", b"{}")
    root.write(f"{DEAD_KEY}-deadbeef0000/users/{DEAD}", b"")
    sb.plant_inside("area/cache")
    return sb, base, options


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
