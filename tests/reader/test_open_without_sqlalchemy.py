"""``dal.open`` pins a version through the quick catalog reader (``dal.catalog.lite``): a training process that only
reads never imports SQLAlchemy (a third of a second) nor compiles its queries, and gets the same dataset, version
and rows as through ``Catalog``; references only ``Catalog`` resolves (times) and every error still go through
it. Checked in real processes by what they imported, on SQLite and on the real PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import dal
from dal.catalog import Catalog
from tests.conftest import use_catalog

REPO = Path(__file__).resolve().parents[2]
PROBE = """
import json, sys
import dal
out = []
for ref in json.loads(sys.argv[1]):
    try:
        ds = dal.open("open.fast", ref)
        out.append({"info": repr(ds.info), "version": repr(ds.version), "ids": ds.to_arrow()["id"].to_pylist(),
                    "sqlalchemy": "sqlalchemy" in sys.modules})
    except Exception as e:
        out.append({"error": type(e).__name__, "message": str(e), "sqlalchemy": "sqlalchemy" in sys.modules})
print(json.dumps(out))
"""


def probe(url: str, refs: list[object]) -> list[dict[str, object]]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "DAL_CATALOG_URL": url}
    p = subprocess.run([sys.executable, "-c", PROBE, json.dumps(refs)], capture_output=True, text=True, env=env,
                       timeout=120)  # fmt: skip
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_open_reads_the_catalog_without_sqlalchemy_and_pins_the_same_version(
    catalog_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat = use_catalog(catalog_url, tmp_path, monkeypatch)
    for i in range(3):
        dal.write(pa.table({"id": list(range(10 * i, 10 * i + 10))}), "open.fast", tags=["prod"] if i == 1 else None)
    expected = {ref: cat.version("open.fast", ref) for ref in (None, 0, 1, 2, "prod", "2")}
    info = cat.get_dataset("open.fast")

    quick = probe(catalog_url, [None, 0, "prod", "2"])  # latest, a number, a tag, digits: no SQLAlchemy at all
    for ref, got in zip([None, 0, "prod", "2"], quick, strict=True):
        assert got["sqlalchemy"] is False, ref
        assert got["info"] == repr(info) and got["version"] == repr(expected[ref]), ref
        want = dal.open("open.fast", ref, catalog=cat).to_arrow()["id"].to_pylist()  # through Catalog here
        assert got["ids"] == want, ref

    # a time is Catalog's to resolve; a missing number, tag or dataset gets Catalog's own error
    later = cat.version("open.fast").created_at.isoformat()
    slow = probe(catalog_url, [later, 7, "nope"])
    assert slow[0]["version"] == repr(expected[None]) and slow[0]["sqlalchemy"] is True
    for got, ref in zip(slow[1:], (7, "nope"), strict=True):
        with pytest.raises(Exception) as theirs:
            Catalog(catalog_url).version("open.fast", ref)
        assert (got["error"], got["message"]) == (type(theirs.value).__name__, str(theirs.value))


def test_a_catalog_lite_cannot_serve_is_opened_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A catalog at an older revision: ``dal.catalog.lite`` steps aside and ``dal.open`` gets Catalog's refusal (with
    the upgrade command), as before; a missing catalog file is not created."""
    from alembic import command

    from dal.catalog import migrate
    from dal.catalog.engine import make_engine

    url = f"sqlite:///{tmp_path}/old.db"
    engine = make_engine(url)
    with engine.begin() as conn:
        command.upgrade(migrate._config(conn), "0002")
    engine.dispose()
    got = probe(url, [None])[0]
    assert got["error"] == "CatalogOutOfDate" and "dal db upgrade" in str(got["message"]), got
    missing = tmp_path / "none" / "catalog.db"
    got = probe(f"sqlite:///{missing}", [None])[0]
    assert got["error"] == "CatalogUnavailable" and not missing.parent.exists()


def test_threads_and_forked_children_open_through_their_own_connection(sqlite_env: Catalog, tmp_path: Path) -> None:
    """The quick reader is one connection per process: threads take turns on it, and a forked child (a DataLoader
    worker, a multiprocessing pool) connects anew instead of using its parent's."""
    import multiprocessing
    from concurrent.futures import ThreadPoolExecutor

    import dal.api

    for i in range(3):
        dal.write(pa.table({"id": list(range(10 * i, 10 * i + 10))}), "open.fast")
    expected = sqlite_env.version("open.fast", 1)
    dal.api._catalogs.clear()  # as in a process that only reads (one that wrote reads through its Catalog)
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _i: dal.open("open.fast", 1).version, range(200)))
    assert got == [expected] * 200
    url = sqlite_env.url
    parent = {k: v for k, v in dal.api._readers.items() if k[0] == url}
    assert list(parent) == [(url, os.getpid())] and parent[(url, os.getpid())] is not None

    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        children = pool.map(_child_open, range(4))
    for version, pids in children:  # the parent's reader (inherited) and the child's own
        assert version == repr(expected) and pids[-1] != os.getpid() and os.getpid() in pids
    assert dal.open("open.fast", 1).version == expected
    assert {k: v for k, v in dal.api._readers.items() if k[0] == url} == parent


def _child_open(_i: int) -> tuple[str, list[int]]:
    import dal.api

    version = repr(dal.open("open.fast", 1).version)
    url = dal.api.default_url()
    return version, [pid for u, pid in dal.api._readers if u == url]


def test_a_postgres_catalog_at_another_revision_is_refused_as_before(pg_url: str) -> None:
    """On PostgreSQL the quick reader checks the revision in ``pin``'s own statement (no connection of its own for
    that): a catalog at an older revision still gets Catalog's refusal, with the upgrade command."""
    from alembic import command

    from dal.catalog import migrate
    from dal.catalog.engine import make_engine

    engine = make_engine(pg_url)
    with engine.begin() as conn:
        command.upgrade(migrate._config(conn), "0002")
    engine.dispose()
    got = probe(pg_url, [None, 0])
    for one in got:
        assert one["error"] == "CatalogOutOfDate" and "dal db upgrade" in str(one["message"]), one
