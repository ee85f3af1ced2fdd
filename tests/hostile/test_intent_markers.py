"""Forged and corrupt intent markers (issue #32): a marker dal did not write — not JSON, not an object, a field
of the wrong type or out of range, nested 100k deep, NaN, larger than any marker — is *unreadable*: it protects
every unreferenced file until it is ``EXPIRES_AFTER_S`` old by its modification time, then gc and purge remove
it like an expired one. Neither gc, purge nor ``dal drop --purge`` ever fails with an internal error on it."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import dal
from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema
from dal.catalog import Catalog
from dal.ops import lifecycle
from dal.storage import intents
from dal.storage.location import Location
from tests.faults.races import NOW

SCHEMA = TensorSchema(
    "Rows", [TensorField("id", np.int64, (), ScalarCodec()), TensorField("m", np.float32, (2,), NdarrayCodec())]
)
TOKEN = "abcdef012345"


def _body(**changes: Any) -> dict[str, Any]:
    """A marker as a writer on another machine writes it, with ``changes`` forged into it."""
    now = time.time()
    body: dict[str, Any] = {"write_id": TOKEN + "0" * 20, "dataset": "other.x", "token": TOKEN, "pid": 4242,
                            "pid_start": "77", "host": "elsewhere", "boot_id": "b", "pid_ns": "pid:[1]",
                            "started": now, "store_started": now, "heartbeat_s": 30.0, "expires_after_s": 300.0}  # fmt: skip
    body.update(changes)
    return body


def _forged(raw: str) -> bytes:
    """A marker whose JSON text is a valid marker's with one field's value replaced by ``raw`` (NaN, 1e999…)."""
    return json.dumps(_body(pid="@@")).replace('"@@"', raw).encode()


FORGERIES: dict[str, bytes] = {
    "empty-list": b"[]",
    "string": b'"a marker"',
    "number": b"42",
    "null": b"null",
    "empty": b"",
    "not-utf8": b"\xff\xfe\x00{",
    "pid-1e999": _forged("1e999"),
    "pid-huge-int": _forged("1" + "0" * 400),
    "pid-string": json.dumps(_body(pid="4242")).encode(),
    "pid-true": json.dumps(_body(pid=True)).encode(),
    "pid-negative": json.dumps(_body(pid=-1)).encode(),
    "deep-100k": b"[" * 100_000,
    "deep-under-cap": b"[" * 60_000 + b"]" * 60_000,
    "deep-object": b'{"a":' * 20_000 + b"1" + b"}" * 20_000,
    "started-nan": json.dumps(_body(started=float("nan"))).encode(),
    "started-infinity": json.dumps(_body(started=float("inf"))).encode(),
    "started-huge": json.dumps(_body(started=1e300)).encode(),
    "started-string": json.dumps(_body(started="yesterday")).encode(),
    "store-started-list": json.dumps(_body(store_started=[1])).encode(),
    "token-list": json.dumps(_body(token=[TOKEN])).encode(),
    "token-missing": json.dumps({k: v for k, v in _body().items() if k != "token"}).encode(),
    "write-id-number": json.dumps(_body(write_id=12345678901234567890)).encode(),
    "host-object": json.dumps(_body(host={"name": "x"})).encode(),
    "dataset-list": json.dumps(_body(dataset=["a"])).encode(),
    "oversized": json.dumps(_body(dataset="x" * 70_000)).encode(),
}


def _write(name: str, fmt: str) -> Path:
    if fmt == "delta":
        dal.write(pa.table({"id": [1, 2, 3]}), name)
    else:
        dal.write(
            [{"id": i, "m": np.full(2, i, np.float32)} for i in range(3)], name, format="petastorm", schema=SCHEMA
        )
    return Path(dal.get_catalog().get_dataset(name).location)


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def _plant(location: Path, fmt: str, body: bytes, age_s: float) -> tuple[Path, Path]:
    """The forged marker (modified ``age_s`` ago) and an abandoned file no readable intent claims (hours old)."""
    marker = location / intents.DIR / "forged.json"
    marker.parent.mkdir(exist_ok=True)
    marker.write_bytes(body)
    _age(marker, age_s)
    orphan = location / "fedcba987654-orphan.parquet" if fmt == "delta" else location / "v9-fedcba987654" / "p.parquet"
    orphan.parent.mkdir(exist_ok=True)
    orphan.write_bytes(b"PAR1")
    _age(orphan, 7200)
    return marker, orphan


EXPIRED_S = intents.EXPIRES_AFTER_S + 5


@pytest.mark.parametrize("fmt", ["delta", "petastorm"])
@pytest.mark.parametrize("forgery", FORGERIES, ids=str)
def test_a_forged_marker_protects_until_it_expires_then_goes(sqlite_env: Catalog, fmt: str, forgery: str) -> None:
    name = f"forged.{fmt}"
    location = _write(name, fmt)
    marker, orphan = _plant(location, fmt, FORGERIES[forgery], age_s=1)
    seen = intents.scan(Location.of(str(location)))
    assert seen.unreadable == (f"{intents.DIR}/forged.json",) and seen.live == () and seen.expired == ()
    assert lifecycle.gc(name, safe_age=NOW).deleted == ()  # unreadable: every unreferenced file stays
    assert marker.exists() and orphan.exists()
    with pytest.raises(dal.DalError, match=r"a write is in flight .*unreadable intent marker .*nothing was deleted"):
        lifecycle.drop(name, purge=True)
    assert marker.exists() and orphan.exists()

    _age(marker, EXPIRED_S)  # no heartbeat for longer than the expiry: removable like a dead writer's marker
    rel = orphan.relative_to(location).as_posix()
    assert set(lifecycle.gc(name, safe_age=NOW).deleted) == {rel, f"{intents.DIR}/forged.json"}
    assert not marker.exists() and not orphan.exists()
    assert len(dal.open(name).to_arrow()) == 3

    marker, _orphan = _plant(location, fmt, FORGERIES[forgery], age_s=EXPIRED_S)  # an expired one, then a purge
    assert lifecycle.drop(name, purge=True).purged and not location.exists()


def _dal(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dal.cli", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("fmt", ["delta", "petastorm"])
def test_dal_drop_and_gc_on_the_command_line_with_forged_markers(sqlite_env: Catalog, fmt: str) -> None:
    """Every forgery at once: ``dal gc`` keeps everything, ``dal drop --purge`` refuses in one line (exit 1); once
    the markers expired both go through."""
    name = f"cli.{fmt}"
    location = _write(name, fmt)
    folder = location / intents.DIR
    folder.mkdir()
    for forgery, body in FORGERIES.items():
        (folder / f"{forgery}.json").write_bytes(body)
    gc = _dal("gc", name, "--safe-age", "0s")
    assert gc.returncode == 0, gc.stderr
    assert len(list(folder.iterdir())) == len(FORGERIES)
    drop = _dal("drop", name, "--purge", "--yes")
    assert drop.returncode == 1, drop.stderr
    assert drop.stderr.startswith("dal: error: ") and len(drop.stderr.strip().splitlines()) == 1, drop.stderr
    assert "a write is in flight" in drop.stderr and "internal error" not in drop.stderr
    for marker in folder.iterdir():
        _age(marker, EXPIRED_S)
    gc = _dal("gc", name, "--safe-age", "0s")
    assert gc.returncode == 0 and "internal error" not in gc.stderr, gc.stderr
    assert not folder.exists() or not list(folder.iterdir())
    for forgery, body in FORGERIES.items():  # expired again, for the purge
        folder.mkdir(exist_ok=True)
        (folder / f"{forgery}.json").write_bytes(body)
        _age(folder / f"{forgery}.json", EXPIRED_S)
    drop = _dal("drop", name, "--purge", "--yes")
    assert drop.returncode == 0, drop.stderr
    assert not location.exists()


def _tree(root: Path) -> str:
    """A digest of everything below ``root`` (names, kinds, bytes, modification times; links not followed)."""
    digest = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        st = os.lstat(folder)
        digest.update(f"{Path(folder).relative_to(root)}|{st.st_mode}|{st.st_mtime_ns}\n".encode())
        for f in sorted(files):
            path = Path(folder, f)
            st = os.lstat(path)
            digest.update(f"{path.relative_to(root)}|{st.st_mode}|{st.st_mtime_ns}|".encode() + path.read_bytes())
    return digest.hexdigest()


@pytest.fixture
def canary(tmp_path: Path) -> Path:
    """A folder outside any dataset holding three markers of dead writers (what gc would delete)."""
    folder = tmp_path / "canary"
    folder.mkdir()
    for i in range(3):
        marker = folder / f"{i:012x}dead.json"
        marker.write_bytes(json.dumps(_body(write_id=f"{i:012x}dead")).encode())
        _age(marker, EXPIRED_S)
    return folder


@pytest.mark.parametrize("fmt", ["delta", "petastorm"])
def test_a_linked_intents_folder_is_refused_and_its_target_left_alone(
    sqlite_env: Catalog, canary: Path, fmt: str
) -> None:
    name = f"linked.{fmt}"
    location = _write(name, fmt)
    (location / intents.DIR).symlink_to(canary, target_is_directory=True)
    before = _tree(canary)
    refused = rf"intent markers' folder {re.escape(str(location / intents.DIR))} is a symbolic link"
    with pytest.raises(dal.DalError, match=refused + r".*nothing was committed"):
        _write(name, fmt)
    assert [v.number for v in sqlite_env.versions(name)] == [0]
    with pytest.raises(dal.DalError, match=refused + r".*nothing was deleted"):
        lifecycle.gc(name, safe_age=NOW)
    with pytest.raises(dal.DalError, match=refused):
        lifecycle.drop(name, purge=True)
    for args in (["gc", name], ["drop", name, "--purge", "--yes"]):
        proc = _dal(*args)
        assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert proc.stderr.startswith("dal: error: ") and "is a symbolic link" in proc.stderr, proc.stderr
    assert _tree(canary) == before and (location / intents.DIR).is_symlink()
    assert sqlite_env.get_dataset(name).latest_version == 0 and len(dal.open(name).to_arrow()) == 3


@pytest.mark.parametrize("target", ["dangling", "file"])
def test_a_markers_folder_that_is_no_folder_is_refused(sqlite_env: Catalog, tmp_path: Path, target: str) -> None:
    location = _write("odd.d", "delta")
    if target == "file":
        (location / intents.DIR).write_bytes(b"not a folder")
    else:
        (location / intents.DIR).symlink_to(tmp_path / "nowhere")
    for attempt in (lambda: _write("odd.d", "delta"), lambda: lifecycle.gc("odd.d"),
                    lambda: lifecycle.drop("odd.d", purge=True)):  # fmt: skip
        with pytest.raises(dal.DalError, match=re.escape(str(location / intents.DIR))):
            attempt()
    assert not (tmp_path / "nowhere").exists() and len(dal.open("odd.d").to_arrow()) == 3


def test_a_linked_marker_file_is_not_read_through_the_link(sqlite_env: Catalog, tmp_path: Path) -> None:
    """A marker that is a symbolic link to a file elsewhere (here a valid, live marker) is not read through the
    link: it is unreadable, protects as an unreadable marker does by the link's own age, and the file it points
    to is left alone when the link expires (only the link goes). The old code read the target as a live write."""
    location = _write("linked.marker", "delta")
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes(json.dumps(_body()).encode())  # a live write (on another machine), by its text
    (location / intents.DIR).mkdir(exist_ok=True)
    link = location / intents.DIR / f"{TOKEN}{'0' * 20}.json"
    link.symlink_to(elsewhere)
    found = intents.scan(Location.of(str(location)))
    assert found.live == () and found.unreadable == (f"{intents.DIR}/{link.name}",)
    _age(elsewhere, EXPIRED_S)  # an old target: the link's own age counts, not the target's
    assert intents.scan(Location.of(str(location))).expired == ()
    os.utime(link, (time.time() - EXPIRED_S,) * 2, follow_symlinks=False)
    assert [r for r, _ in intents.scan(Location.of(str(location))).expired] == [f"{intents.DIR}/{link.name}"]
    lifecycle.gc("linked.marker", safe_age=NOW)
    assert not os.path.lexists(link) and elsewhere.exists()  # the link went, never its target
