"""The converter cache's publication protocol across real processes (no Spark): racing publishers of one
key share the winner's entry, the last user's exit removes it, a killed writer's folder is never used."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
from pathlib import Path
from typing import Any

from dal.spark import convert_cache
from dal.storage import ownership

KEY = "0123456789abcdef" * 2 + "01234567"  # a plan key: 40 hex digits, as dal.convert makes them


def _racer(root: str, barrier: Any, out: Any) -> None:
    folder = convert_cache.begin(Path(root), KEY)
    (folder / "catalog.db").write_text(folder.name)  # the "complete" conversion
    barrier.wait()
    entry = convert_cache.publish(Path(root), KEY, folder, rows=1)
    out.put(entry.folder.name)
    barrier.wait()  # all four converters are running when they have their answer
    convert_cache.release_all()  # what atexit does


def test_racing_publishers_share_one_entry_and_the_last_user_removes_it(tmp_path: Path) -> None:
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_racer, args=(str(tmp_path), barrier, out)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    names = {out.get(timeout=5) for _ in procs}
    assert len(names) == 1 and all(p.exitcode == 0 for p in procs)  # all four used the winner's entry
    # every user exited: the last one removed the entry; the losers' folders are gone too (the root's sentinel stays)
    assert [p.name for p in tmp_path.iterdir()] == [ownership.SENTINEL]


def test_an_entry_in_use_survives_another_users_exit(tmp_path: Path) -> None:
    folder = convert_cache.begin(tmp_path, KEY)
    (folder / "catalog.db").write_text("x")
    convert_cache.publish(tmp_path, KEY, folder, rows=1)
    ctx = mp.get_context("fork")

    def use_and_exit() -> None:
        assert convert_cache.lookup(tmp_path, KEY) is not None
        convert_cache.release_all()

    p = ctx.Process(target=use_and_exit)
    p.start()
    p.join(60)
    assert p.exitcode == 0
    entry = convert_cache.lookup(tmp_path, KEY)  # still published: this process uses it
    assert entry is not None and entry.folder == folder
    convert_cache.release_all()
    assert convert_cache.lookup(tmp_path, KEY) is None and not folder.exists()


def test_a_killed_writer_leaves_nothing_a_later_lookup_uses(tmp_path: Path) -> None:
    ctx = mp.get_context("fork")
    ready = ctx.Event()

    def write_then_hang() -> None:
        folder = convert_cache.begin(tmp_path, KEY)
        (folder / "catalog.db").write_text("half")
        ready.set()
        signal.pause()

    p = ctx.Process(target=write_then_hang)
    p.start()
    assert ready.wait(60)
    assert convert_cache.lookup(tmp_path, KEY) is None  # written, never published
    assert convert_cache.sweep(tmp_path) == []  # its writer is alive: not swept
    os.kill(p.pid, signal.SIGKILL)
    p.join(60)
    assert convert_cache.lookup(tmp_path, KEY) is None
    assert len(convert_cache.sweep(tmp_path)) == 1 and [p.name for p in tmp_path.iterdir()] == [ownership.SENTINEL]


def test_a_marker_whose_folder_is_gone_is_stale(tmp_path: Path) -> None:
    folder = convert_cache.begin(tmp_path, KEY)
    (folder / "catalog.db").write_text("x")
    convert_cache.publish(tmp_path, KEY, folder, rows=1)
    (folder / "catalog.db").unlink()  # someone deleted the data behind the cache's back
    assert convert_cache.lookup(tmp_path, KEY) is None
    assert not (tmp_path / f"{KEY}.ready").exists()
    convert_cache.release_all()
