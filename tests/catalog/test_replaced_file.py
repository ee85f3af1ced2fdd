"""An SQLite catalog file replaced (``os.replace``: a restore from a backup, another catalog moved in) or deleted
under a running process: the process's next use reads the file now at the path, or fails with a clear
``CatalogUnavailable``, never the old file's rows. For the quick reader (``dal.catalog.lite``: ``dal.open``, the CLI)
and ``Catalog`` (SQLAlchemy), in a real process that keeps its connections open across the change, and in threads.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import dal
import dal.api
from dal.catalog import Catalog, CatalogUnavailable, DatasetNotFound, Field, Schema, VersionDraft, lite

REPO = Path(__file__).resolve().parents[2]
SCHEMA = Schema((Field("id", "int64", False),))
SERVE = """
import json, sys
import dal
url = sys.argv[2]
if sys.argv[1] == "catalog":
    dal.get_catalog(url)  # as in a process that wrote: dal.open pins through its Catalog (SQLAlchemy)
for line in sys.stdin:
    try:
        ds = dal.open(line.strip(), catalog=url)
        out = {"location": ds.info.location, "version": ds.version.number}
    except Exception as e:
        out = {"error": type(e).__name__, "message": str(e)}
    print(json.dumps(out), flush=True)
"""


def make_catalog(path: Path, datasets: dict[str, str]) -> str:
    """A closed SQLite catalog at ``path`` holding ``datasets`` (name -> location), one version each."""
    path.parent.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{path}"
    cat = Catalog(url)
    for name, location in datasets.items():
        cat.create_dataset(name, format="delta", location=location)
        cat.publish(name, VersionDraft("create", SCHEMA, 1))
    cat.close()
    return url


def datasets_in(path: Path) -> list[tuple[str, str]]:
    """What a fresh connection finds in the file at ``path`` (and that SQLite finds it intact)."""
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        return [tuple(r) for r in conn.execute("SELECT name, location FROM dal_datasets ORDER BY name")]
    finally:
        conn.close()


@pytest.mark.parametrize("through", ["quick", "catalog"])
def test_a_running_process_sees_a_replaced_catalog_file_and_fails_on_a_deleted_one(
    tmp_path: Path, through: str
) -> None:
    served = tmp_path / "a" / "catalog.db"
    url = make_catalog(served, {"first.one": "/data/first", "both.one": "/data/a"})
    other = tmp_path / "b" / "catalog.db"
    make_catalog(other, {"second.one": "/data/second", "both.one": "/data/b"})
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", SERVE, through, url], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip

    def ask(name: str) -> dict[str, object]:
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(name + "\n")
        child.stdin.flush()
        return json.loads(child.stdout.readline())  # type: ignore[no-any-return]

    try:
        assert ask("first.one") == {"location": "/data/first", "version": 0}
        assert ask("both.one") == {"location": "/data/a", "version": 0}
        # the child holds its connection on the first file while another catalog's file takes its path
        os.replace(other, served)
        assert ask("both.one") == {"location": "/data/b", "version": 0}
        assert ask("second.one") == {"location": "/data/second", "version": 0}
        assert ask("first.one")["error"] == "DatasetNotFound"
        assert datasets_in(served) == [("both.one", "/data/b"), ("second.one", "/data/second")]  # intact
        os.remove(served)
        gone = ask("both.one")
        assert gone["error"] == "CatalogUnavailable" and str(served) in str(gone["message"]), gone
        assert not served.exists()  # a read creates nothing
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=60)
    assert child.returncode == 0, child.stderr.read() if child.stderr else ""


def test_both_readers_in_one_process_and_its_threads_follow_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A quick reader and a Catalog of the same file in one process (one wrote, the other pinned versions), used
    from threads: after the replacement every thread reads the new file, and the new file is intact (no
    connection of this process kept the old file's write-ahead log beside it)."""
    served = tmp_path / "a" / "catalog.db"
    url = make_catalog(served, {"both.one": "/data/a"})
    make_catalog(tmp_path / "b" / "catalog.db", {"both.one": "/data/b", "second.one": "/data/second"})
    cat = Catalog(url)
    cat.update_dataset("both.one", description="written through the Catalog: its WAL holds this")
    quick = lite.connect(url)
    assert quick is not None
    monkeypatch.setattr(dal.api, "_readers", {(url, os.getpid()): quick})
    monkeypatch.setattr(dal.api, "_catalogs", {})

    def locations(_i: int) -> tuple[str, str, str]:
        return (dal.open("both.one", catalog=url).info.location, quick.get_dataset("both.one").location,
                cat.get_dataset("both.one").location)  # fmt: skip

    try:
        with ThreadPoolExecutor(8) as pool:
            assert set(pool.map(locations, range(64))) == {("/data/a",) * 3}
        os.replace(tmp_path / "b" / "catalog.db", served)
        with ThreadPoolExecutor(8) as pool:
            assert set(pool.map(locations, range(64))) == {("/data/b",) * 3}
        assert [d.name for d in cat.list_datasets()] == [d.name for d in quick.list_datasets()] == [
            "both.one", "second.one"
        ]  # fmt: skip
        assert datasets_in(served) == [("both.one", "/data/b"), ("second.one", "/data/second")]
        os.remove(served)
        for read in (lambda: quick.get_dataset("both.one"), lambda: cat.get_dataset("both.one"),
                     lambda: dal.open("both.one", catalog=url)):  # fmt: skip
            with pytest.raises(CatalogUnavailable, match=str(served)):
                read()
        with pytest.raises(CatalogUnavailable):
            cat.update_dataset("both.one", description="never written into the deleted file")
        assert not served.exists()
    finally:
        quick.close()
        cat.close()


def test_a_catalog_handle_checks_the_revision_of_the_file_it_finds(tmp_path: Path) -> None:
    """The file that replaced the catalog is read as a fresh handle would read it: the quick reader steps aside
    for a file it cannot serve (an error for its caller to fall back on), and a missing dataset is the new file's."""
    served = tmp_path / "a" / "catalog.db"
    url = make_catalog(served, {"first.one": "/data/first"})
    quick = lite.connect(url)
    cat = Catalog(url)
    assert quick is not None
    try:
        not_a_catalog = tmp_path / "plain.db"
        sqlite3.connect(not_a_catalog).execute("CREATE TABLE t (x)").connection.close()
        os.replace(not_a_catalog, served)
        with pytest.raises(CatalogUnavailable):
            quick.get_dataset("first.one")
        make_catalog(tmp_path / "b" / "catalog.db", {"second.one": "/data/second"})
        os.replace(tmp_path / "b" / "catalog.db", served)
        assert quick.get_dataset("second.one").location == cat.get_dataset("second.one").location == "/data/second"
        with pytest.raises(DatasetNotFound):
            quick.get_dataset("first.one")
    finally:
        quick.close()
        cat.close()
