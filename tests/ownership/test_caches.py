"""The converter cache and the file cache delete only what dal made: a root is dal's only with its sentinel (or
in a previous release's layout), inside it only entries whose names and contents dal wrote, never through a
link — on local disk and on the S3 emulator. Every test points dal at a sandbox in tmp_path, never at a real
system folder (a CLI fuzz once ran ``dal cache clear --dir /etc``)."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from dal.cli.app import cli
from dal.errors import DalError
from dal.spark import convert_cache
from dal.storage import rangecache
from dal.storage.location import Location
from tests.ownership.canaries import OLD, S3Sandbox, Sandbox

KEY = "0123456789abcdef" * 2 + "01234567"  # a plan key, as dal.convert makes them (40 hex digits)
OTHER = "89abcdef01234567" * 2 + "89abcdef"
DEAD = f"{socket.gethostname()}-{2**22 + 4321}"  # a pid no process has (above pid_max's default)
SENTINEL = ".dal-cache"


def clear(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(cli, ["cache", "clear", *args])
    return r.exit_code, r.output


def abandoned(root: Path, key: str = KEY, token: str = "deadbeef0000") -> Path:
    """A conversion folder whose writer died long ago: what the sweep exists to remove."""
    folder = root / f"{key}-{token}"
    (folder / "table").mkdir(parents=True)
    (folder / "catalog.db").write_bytes(b"x")
    (folder / "users").mkdir()
    (folder / "users" / DEAD).touch()
    os.utime(folder, (OLD, OLD))
    return folder


def test_cache_clear_on_a_folder_dal_did_not_make_deletes_nothing(tmp_path: Path) -> None:
    # the reproduction: an old unrelated project in the folder named by --dir
    sb = Sandbox(tmp_path / "sandbox")
    code, out = clear("--dir", str(sb.base))
    assert code != 0 and "is not a dal converter cache" in out and "nothing was deleted" in out
    assert len(out.strip().splitlines()) == 1
    code, out = clear("--dir", str(sb.base), "--force", "--json")
    assert code != 0 and "nothing was deleted" in out
    assert sb.touched() == []
    assert not (sb.base / SENTINEL).exists()  # clearing marks nothing


def test_the_sweep_at_every_conversion_refuses_a_folder_dal_did_not_make(tmp_path: Path) -> None:
    sb = Sandbox(tmp_path / "sandbox")
    with pytest.raises(DalError, match="not a dal converter cache.*name a new or empty folder"):
        convert_cache.begin(sb.base, KEY)  # what every dal.convert(df, cache_dir=...) does first
    with pytest.raises(DalError, match="not a dal converter cache"):
        convert_cache.sweep(sb.base)
    with pytest.raises(DalError, match="not a dal converter cache"):
        convert_cache.cache_root(str(sb.base))  # dal.convert's check, before Spark runs
    assert sb.touched() == [] and not (sb.base / SENTINEL).exists()


def test_inside_its_root_dal_deletes_only_the_conversions_it_wrote(tmp_path: Path) -> None:
    sb = Sandbox(tmp_path / "sandbox")
    root = sb.manage(tmp_path / "sandbox" / "cache")
    folder = convert_cache.begin(root, KEY)  # marks the new root as dal's
    (folder / "catalog.db").write_text("complete")
    convert_cache.publish(root, KEY, folder, rows=1)
    dead = abandoned(root, OTHER)
    sb.plant_inside(root)  # a user later put things into the cache folder
    # a folder named like a conversion that holds what no conversion writes, a link named like one, and a
    # marker naming a folder outside the root
    sb.plant(root / f"{OTHER}-0123456789ab" / "thesis.tex", b"named like an entry, not one")
    sb.watch(sb.link(root / f"{OTHER}-aaaaaaaaaaaa", sb.base / "precious"))
    (root / f"{OTHER}.ready").write_text(json.dumps({"entry": "../precious", "created": "2000-01-01"}))
    (root / f"{'f' * 40}.ready").write_text(json.dumps({"entry": "", "created": "2000-01-01"}))

    code, out = clear("--dir", str(root), "--force")
    assert code == 0, out
    assert "removed 1 cached conversion" in out  # the published one; the dead one swept too
    assert not folder.exists() and not dead.exists()
    assert sb.touched() == []
    assert convert_cache.lookup(root, OTHER) is None  # a marker naming a foreign folder is never used
    convert_cache.release_all()


def test_a_previous_release_cache_without_sentinel_is_recognised_by_its_layout(tmp_path: Path) -> None:
    root = tmp_path / "old-cache"
    dead = abandoned(root)
    (root / f"{KEY}.ready").write_text(json.dumps({"entry": dead.name, "created": "2000-01-01"}))
    removed, kept = convert_cache.clear(root)  # every entry follows dal's layout: dal's
    assert [e.folder for e in removed] == [dead] and kept == [] and not dead.exists()
    assert not (root / SENTINEL).exists()  # clear marks nothing...
    assert convert_cache.cache_root(str(root)) == root and (root / SENTINEL).is_file()  # ...first use does
    assert json.loads((root / SENTINEL).read_text())["dal_cache"] == "conversions"


def test_the_two_caches_never_take_each_other_for_their_own(tmp_path: Path) -> None:
    files = tmp_path / "filecache"
    rangecache.FileCache.create(str(files), "1MB")
    conversions = convert_cache.cache_root(str(tmp_path / "cache"))
    with pytest.raises(DalError, match="dal's file cache, not its converter cache"):
        convert_cache.clear(files)
    with pytest.raises(DalError, match="dal's converter cache, not its file cache"):
        rangecache.clear(conversions)
    code, out = clear("--files", "--dir", str(conversions))
    assert code != 0 and "not a dal file cache" in out


def test_file_cache_clear_and_eviction_delete_only_ranges_never_through_links(tmp_path: Path) -> None:
    sb = Sandbox(tmp_path / "sandbox")
    code, out = clear("--files", "--dir", str(sb.base))  # holds v1/ab/<64 c>/0-10 among other things
    assert code != 0 and "not a dal file cache" in out and "nothing was deleted" in out
    with pytest.raises(DalError, match="not a dal file cache"):
        rangecache.FileCache.create(str(sb.base), "1MB")  # dal.open(..., cache="local", cache_dir=...)
    assert sb.touched() == []

    root = sb.manage(sb.base / "filecache")
    cache = rangecache.FileCache.create(str(root), "1MB")
    shard = root / "v1" / "0f"
    mine = shard / ("0" * 64)
    mine.mkdir(parents=True)
    (mine / "0-100").write_bytes(b"r" * 100)
    os.utime(mine / "0-100", (OLD, OLD))
    sb.link(root / "v1" / "1f", sb.outside)  # a shard that is a link to a canary folder
    sb.link(shard / ("1" * 64), sb.base / "projectA")  # a file folder that is a link
    sb.plant(shard / ("2" * 64) / "thesis.tex", b"not a range", watch=shard / ("2" * 64))  # a name dal never writes
    assert rangecache.usage(root) == 100
    # eviction: a pass with no room left removes every unprotected range it may
    assert rangecache._store(cache.root).evict(limit=1, incoming=1, protect_since=time.time()) == 0
    assert not (mine / "0-100").exists()
    code, out = clear("--files", "--dir", str(root))
    assert code == 0, out
    assert sb.touched() == []


def test_a_range_is_never_stored_through_a_link(tmp_path: Path) -> None:
    sb = Sandbox(tmp_path / "sandbox")
    root = sb.manage(sb.base / "filecache")
    cache = rangecache.FileCache.create(str(root), "1MB")
    folder = cache.store.folder("s3://|", "bucket/file.parquet")
    sb.link(folder.parent, sb.outside)  # the range's shard is a link to a canary
    data = cache.read(folder, 0, 4, lambda a, b: b"abcd")
    assert data == b"abcd" and cache.stats.bytes_stored == 0
    cache.store.record_size(folder, "s3://|", "bucket/file.parquet", 4)
    assert sb.touched() == []


# -- object storage ------------------------------------------------------------------------------------------


def test_s3_cache_clear_and_sweep_refuse_a_prefix_dal_did_not_make(s3: tuple[str, dict[str, str]]) -> None:
    bucket, options = s3
    sb = S3Sandbox(bucket, options)
    for uri in (f"s3://{bucket}", f"s3://{bucket}/projectA"):
        root = Location.of(uri, options)
        for op in (convert_cache.remote_clear, convert_cache.remote_sweep):
            with pytest.raises(DalError, match="not a dal converter cache"):
                op(root)
        with pytest.raises(DalError, match="not a dal converter cache"):
            convert_cache.remote_begin(root, KEY)
        with pytest.raises(DalError, match="not a dal converter cache"):
            convert_cache.remote_root(uri, options)  # what dal.convert(df, cache_dir="s3://…") checks first
    assert sb.touched() == [] and not any(k.endswith(SENTINEL) for k in sb.keys(bucket))


def test_inside_an_s3_cache_only_conversions_go(s3: tuple[str, dict[str, str]]) -> None:
    bucket, options = s3
    sb = S3Sandbox(bucket, options)
    root = convert_cache.remote_root(f"s3://{bucket}/cache", options)  # marks the new prefix
    folder = convert_cache.remote_begin(root, KEY)
    root.write(f"{folder}/table/part-0.parquet", b"x")
    convert_cache.remote_publish(root, KEY, folder, rows=1)
    dead = f"{OTHER}-deadbeef0000"
    root.write(f"{dead}/table/_delta_log/00000000000000000000.json", b"{}")
    root.write(f"{dead}/users/{DEAD}", b"")
    sb.plant_inside("cache")
    sb.plant(bucket, f"cache/{OTHER}-0123456789ab/thesis.tex", b"named like an entry, not one")
    sb.plant(bucket, f"cache/{OTHER}-0123456789ab/users/{DEAD}", b"")
    root.write(f"{OTHER}.ready", json.dumps({"entry": "", "created": "2000-01-01"}).encode())
    removed, kept = convert_cache.remote_clear(root, force=True)
    assert [e.folder for e in removed] == [folder] and kept == []
    assert not any(k.startswith((f"cache/{folder}", f"cache/{dead}")) for k in sb.keys(bucket))
    assert sb.touched() == []
    convert_cache.release_all()


def test_dal_cache_clear_on_s3(s3: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    bucket, options = s3
    sb = S3Sandbox(bucket, options)
    for k, v in options.items():  # the CLI reaches object storage with the environment's credentials
        monkeypatch.setenv(k, v)
    code, out = clear("--dir", f"s3://{bucket}/", "--force")
    assert code != 0 and "is not a dal converter cache" in out and "nothing was deleted" in out
    root = convert_cache.remote_root(f"s3://{bucket}/cache", options)
    folder = convert_cache.remote_begin(root, KEY)
    root.write(f"{folder}/table/part-0.parquet", b"x")
    convert_cache.remote_publish(root, KEY, folder, rows=1)
    sb.plant_inside("cache")
    listed = CliRunner().invoke(cli, ["cache", "ls", "--dir", f"s3://{bucket}/cache", "--json"])
    assert listed.exit_code == 0 and [e["key"] for e in json.loads(listed.output)] == [KEY]
    code, out = clear("--dir", f"s3://{bucket}/cache")
    assert code == 0 and "removed 0" in out and "kept 1 in use" in out  # this process uses it
    code, out = clear("--dir", f"s3://{bucket}/cache", "--force")
    assert code == 0 and "removed 1 cached conversion(s) from s3://" in out
    assert sb.touched() == [] and not any(k.startswith(f"cache/{folder}") for k in sb.keys(bucket))
    convert_cache.release_all()
