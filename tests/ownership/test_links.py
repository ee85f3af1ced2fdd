"""gc and ``drop --purge`` never follow directory links: a linked directory inside a dataset (a Petastorm
version's ``shared -> elsewhere``, a partition-looking ``date=2099-01-01 -> elsewhere`` in a Delta table) is
reported and never descended into; a linked file is deleted as the link, never its target."""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner

import dal
from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema
from dal.catalog import Catalog
from dal.cli.app import cli
from tests.ownership.canaries import Sandbox

SCHEMA = TensorSchema(
    "S", [TensorField("id", np.int64, (), ScalarCodec()), TensorField("x", np.float32, (2,), NdarrayCodec())]
)


def run(cat: Catalog, *args: str) -> tuple[int, str]:
    r = CliRunner().invoke(cli, ["--catalog", cat.url, *args])
    return r.exit_code, r.output


def delta(sb: Sandbox, name: str = "l.d") -> Path:
    where = sb.manage(sb.base / "ds.delta")
    for i in range(3):  # overwrites: every older version's file is garbage once it expires
        dal.write(pa.table({"id": [i, i + 1]}), name, path=str(where), mode="overwrite" if i else "append")
    return where


def petastorm(sb: Sandbox, name: str = "l.p") -> Path:
    where = sb.manage(sb.base / "ds.petastorm")
    for i in range(2):
        rows = [{"id": j, "x": np.full(2, j, np.float32)} for j in range(i, i + 3)]
        dal.write(rows, name, format="petastorm", schema=SCHEMA, path=str(where), mode="overwrite" if i else "append")
    return where


def test_delta_gc_does_not_follow_a_partition_looking_link(sqlite_env: Catalog, tmp_path: Path) -> None:
    sb = Sandbox(tmp_path / "sandbox")
    where = delta(sb)
    sb.link(where / "date=2099-01-01", sb.outside)  # holds secret.parquet, old: garbage if gc looked inside
    linked_file = where / "part-00000-linked.parquet"
    linked_file.symlink_to(sb.outside / "secret.parquet")
    os.utime(linked_file, (1, 1), follow_symlinks=False)  # an old, unreferenced "data file" (a link)
    code, out = run(sqlite_env, "gc", "l.d", "--keep-last", "1", "--safe-age", "0s", "--json")
    assert code == 0, out
    assert sb.touched() == []
    done = json.loads(out)
    assert done["links_not_followed"] == ["date=2099-01-01"]
    assert not any(f.startswith("date=2099-01-01/") for f in done["deleted_files"])
    assert "part-00000-linked.parquet" in done["deleted_files"] and not os.path.lexists(linked_file)  # the link only
    assert dal.open("l.d").to_arrow().column("id").to_pylist() == [2, 3]


def test_petastorm_gc_does_not_follow_a_link_in_an_expiring_version(sqlite_env: Catalog, tmp_path: Path) -> None:
    sb = Sandbox(tmp_path / "sandbox")
    where = petastorm(sb)
    v0 = next(p for p in where.iterdir() if p.name.startswith("v0-"))
    sb.link(v0 / "shared", sb.outside)
    code, out = run(sqlite_env, "gc", "l.p", "--keep-last", "1", "--safe-age", "0s")
    assert code == 0, out
    assert sb.touched() == []
    assert f"{v0.name}/shared/ is a symbolic link to a directory: not followed" in out
    assert sorted(p.name for p in v0.iterdir()) == ["shared"]  # its own files went; the link stays
    assert dal.open("l.p").count() == 3


def test_purge_reports_a_linked_directory_and_never_deletes_behind_it(sqlite_env: Catalog, tmp_path: Path) -> None:
    sb = Sandbox(tmp_path / "sandbox")
    where = delta(sb)
    sb.link(where / "date=2099-01-01", sb.outside)
    code, out = run(sqlite_env, "drop", "l.d", "--purge", "--yes")
    assert code != 0 and "date=2099-01-01/" in out and "nothing was deleted" in out
    code, out = run(sqlite_env, "drop", "l.d", "--purge", "--yes", "--force", "--json")
    assert code == 0, out
    assert json.loads(out)["left"] == ["date=2099-01-01/"]
    assert sorted(p.name for p in where.iterdir()) == ["date=2099-01-01"]  # dal's files gone, the link left
    assert sb.touched() == []

    pet = petastorm(sb, "l.p2")
    v0 = next(p for p in pet.iterdir() if p.name.startswith("v0-"))
    sb.link(v0 / "shared", sb.base / "projectA")
    code, out = run(sqlite_env, "drop", "l.p2", "--purge", "--yes", "--force")
    assert code == 0, out
    assert [str(p.relative_to(pet)) for p in pet.rglob("*")] == [v0.name, f"{v0.name}/shared"]
    assert sb.touched() == []


def test_gc_reports_only_the_files_it_deleted_when_a_folder_became_a_link(
    sqlite_env: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partition folder replaced by a link after gc listed it: gc refuses to delete through the link, and its
    result says so, instead of counting those files as deleted (the old result listed them)."""
    sb = Sandbox(tmp_path / "sandbox")
    where = sb.manage(sb.base / "ds.delta")
    for i in range(2):
        table = pa.table({"id": [i, i + 1], "part": ["a", "b"]})
        dal.write(table, "l.parts", path=str(where), partition_by=["part"], mode="overwrite" if i else "append")
    old_a = {p.name for p in (where / "part=a").iterdir()}
    dry = dal.lifecycle.gc("l.parts", keep_last=1, safe_age=timedelta(0), dry_run=True, catalog=sqlite_env)
    marker, release = tmp_path / "paused", tmp_path / "release"
    monkeypatch.setenv("DAL_TEST_PAUSE", "gc-expired")
    monkeypatch.setenv("DAL_TEST_PAUSE_FILE", str(marker))
    monkeypatch.setenv("DAL_TEST_RELEASE_FILE", str(release))
    done: list[Any] = []
    worker = threading.Thread(
        target=lambda: done.append(dal.lifecycle.gc("l.parts", keep_last=1, safe_age=timedelta(0), catalog=sqlite_env))
    )
    worker.start()
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.exists(), "gc never reached gc-expired"
    moved = sb.outside / "moved-part-a"
    (where / "part=a").rename(moved)  # the folder gc listed is now a link to the same files, elsewhere
    (where / "part=a").symlink_to(moved, target_is_directory=True)
    release.touch()
    worker.join(60)
    (result,) = done
    assert not any(f.startswith("part=a/") for f in result.deleted)
    assert any(f.startswith("part=b/") for f in result.deleted)  # the rest of the garbage went as before
    assert {p.name for p in moved.iterdir()} == old_a  # nothing deleted through the link
    assert any("not deleted" in n and "symbolic link" in n for n in result.notes)
    kept_a = sum((moved / f.split("/", 1)[1]).stat().st_size for f in dry.deleted if f.startswith("part=a/"))
    assert kept_a > 0 and result.bytes == dry.bytes - kept_a
