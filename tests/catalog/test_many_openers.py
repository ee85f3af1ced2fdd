"""Many training processes pinning a version at once (``dal.open`` in every rank of a DDP job) against a PostgreSQL
catalog that admits few connections: every open succeeds and pins the same version, because no process keeps a
connection it is not using and a refusal for now ("too many connections") is retried with jittered backoff;
a refusal that waiting cannot cure (no such role, no such database) fails at once, with the usual error.

On the real PostgreSQL, with a role of its own (``CONNECTION LIMIT``) per test, dropped afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

import dal
from dal.catalog import Catalog, CatalogUnavailable, DatasetNotFound
from tests.conftest import use_catalog

pytestmark = pytest.mark.postgres

REPO = Path(__file__).resolve().parents[2]
NAME = "fanin.data"
PROCESSES, THREADS, OPENS = 8, 4, 25  # 200 opens, 32 at once, against 5 connections
OPENER = """
import json, logging, sys, time
from concurrent.futures import ThreadPoolExecutor
import dal
import dal.api  # what dal.open imports (pyarrow, …): before the clock, as in a rank that has its data code loaded

refused = []
class Refusals(logging.Handler):
    def emit(self, record):
        refused.append(record.getMessage())
log = logging.getLogger("dal.catalog")
log.setLevel(logging.DEBUG)
log.addHandler(Refusals())
threads, opens = int(sys.argv[1]), int(sys.argv[2])
print("ready", flush=True)
sys.stdin.readline()  # every process starts at once

def one(_i):
    t = time.perf_counter()
    try:
        v = dal.open(sys.argv[3]).version
        return {"version": [v.number, v.storage_version, v.row_count], "s": time.perf_counter() - t}
    except Exception as e:
        return {"error": type(e).__name__, "message": str(e)[:400], "s": time.perf_counter() - t}

with ThreadPoolExecutor(threads) as pool:
    out = list(pool.map(one, range(opens)))
print(json.dumps({"opens": out, "refused": len([m for m in refused if "retrying" in m])}), flush=True)
"""


def role_url(url: str, role: str) -> str:
    return make_url(url).set(username=role).render_as_string(hide_password=False)


@pytest.fixture
def limited_role(pg_url: str) -> Iterator[tuple[str, str]]:
    """A login role that may open at most 5 connections and read the test's schema: (its URL, its name)."""
    role = f"dal_fanin_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
    with admin.begin() as c:
        c.execute(sa.text(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT 5'))
    try:
        yield role_url(pg_url, role), role
    finally:
        with admin.begin() as c:
            c.execute(sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = :r"), {"r": role})
            c.execute(sa.text(f'DROP OWNED BY "{role}"'))
            c.execute(sa.text(f'DROP ROLE "{role}"'))
        admin.dispose()


def grant_reads(pg_url: str, role: str) -> None:
    schema = dict(make_url(pg_url).query)["options"].split("=", 1)[1]
    admin = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
    with admin.begin() as c:
        c.execute(sa.text(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"'))
        c.execute(sa.text(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"'))
    admin.dispose()


def slot(libpq: str) -> psycopg.Connection[Any]:
    """A connection of the role, once one is free (a closed connection's server process exits a moment later)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return psycopg.connect(libpq)
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def written(pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Catalog:
    """A real dataset of three versions in the test's catalog (written by the superuser)."""
    cat = use_catalog(pg_url, tmp_path, monkeypatch)
    for i in range(3):
        dal.write(pa.table({"id": list(range(10 * i, 10 * i + 10))}), NAME, catalog=pg_url)
    return cat


def test_200_opens_from_8_processes_through_5_connections_all_pin_the_same_version(
    pg_url: str, limited_role: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, role = limited_role
    cat = written(pg_url, tmp_path, monkeypatch)
    grant_reads(pg_url, role)
    latest = cat.version(NAME)
    cat.close()
    env = {**os.environ, "PYTHONPATH": str(REPO), "DAL_CATALOG_URL": url, "OPENLINEAGE_DISABLED": "true"}
    command = [sys.executable, "-c", OPENER, str(THREADS), str(OPENS), NAME]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    children = [subprocess.Popen(command, text=True, env=env, **pipes) for _ in range(PROCESSES)]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready", child.stderr
        started = time.perf_counter()
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        reports = []
        for child in children:
            out, err = child.communicate(timeout=120)
            assert child.returncode == 0, err
            reports.append(json.loads(out.strip().splitlines()[-1]))
        took = time.perf_counter() - started
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    opens = [o for r in reports for o in r["opens"]]
    failures = [o for o in opens if "error" in o]
    assert len(opens) == PROCESSES * OPENS
    assert failures == [], f"{len(failures)} of {len(opens)} opens failed, e.g. {failures[0]}"
    assert {tuple(o["version"]) for o in opens} == {(latest.number, latest.storage_version, latest.row_count)}
    assert sum(r["refused"] for r in reports) > 0  # the limit was reached, and waited out
    assert took < 60, took


def test_a_refusal_for_now_is_waited_out_and_a_lasting_one_fails_within_the_budget(
    pg_url: str, limited_role: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every connection the role may open is taken: ``dal.open`` waits until one is free (a second here), and
    with the slots held past ``DAL_CATALOG_RETRY_S`` it fails then, naming the server's refusal."""
    import dal.api

    url, role = limited_role
    written(pg_url, tmp_path, monkeypatch)
    grant_reads(pg_url, role)
    libpq = "postgresql://" + url.split("://", 1)[1]
    held = [slot(libpq) for _ in range(5)]
    try:
        threading.Timer(1.0, lambda: held.pop().close()).start()
        started = time.perf_counter()
        assert dal.open(NAME, catalog=url).version.number == 2
        assert 0.9 < time.perf_counter() - started < 20
        dal.api._readers.clear()
        monkeypatch.setenv("DAL_CATALOG_RETRY_S", "1.5")
        held.append(slot(libpq))  # all five taken again, for good
        started = time.perf_counter()
        with pytest.raises(CatalogUnavailable, match="too many connections for role") as refused:
            dal.open(NAME, catalog=url)
        assert 1.4 < time.perf_counter() - started < 6, refused.value
        assert "DAL_CATALOG_RETRY_S" in str(refused.value)
    finally:
        for conn in held:
            conn.close()


@pytest.mark.parametrize("wrong", ["role", "database", "dataset"])
def test_a_refusal_that_waiting_cannot_cure_fails_at_once_with_the_usual_error(
    pg_url: str, limited_role: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wrong: str
) -> None:
    """No such role, no such database, no such dataset: the error at once (well under the 30 s of retries a
    refusal for now gets), with the same text as the full Catalog gives."""
    url, role = limited_role
    written(pg_url, tmp_path, monkeypatch)
    grant_reads(pg_url, role)
    monkeypatch.delenv("DAL_CATALOG_RETRY_S", raising=False)
    bad = {
        "role": role_url(url, f"nobody_{uuid.uuid4().hex[:8]}"),
        "database": make_url(url).set(database=f"none_{uuid.uuid4().hex[:8]}").render_as_string(hide_password=False),
        "dataset": url,
    }[wrong]
    name = "fanin.dta" if wrong == "dataset" else NAME
    started = time.perf_counter()
    with pytest.raises((CatalogUnavailable, DatasetNotFound)) as mine:
        dal.open(name, catalog=bad)
    assert time.perf_counter() - started < 2
    with pytest.raises((CatalogUnavailable, DatasetNotFound)) as theirs:
        Catalog(bad).get_dataset(name)
    assert (type(mine.value), str(mine.value)) == (type(theirs.value), str(theirs.value))
    expected = {"role": "does not exist", "database": "does not exist", "dataset": "did you mean 'fanin.data'"}
    assert expected[wrong] in str(mine.value)


def test_a_process_that_pinned_versions_holds_no_connection(
    pg_url: str, limited_role: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After ``dal.open`` through the quick reader (the latest version) and through ``Catalog`` (a time), the
    process keeps no connection of the role open: a rank that trains for hours holds no slot."""
    url, role = limited_role
    cat = written(pg_url, tmp_path, monkeypatch)
    grant_reads(pg_url, role)
    later = cat.version(NAME).created_at.isoformat()
    assert dal.open(NAME, catalog=url).version.number == 2  # catalog.lite
    assert dal.open(NAME, later, catalog=url).version.number == 2  # a time: Catalog (SQLAlchemy)
    assert dal.open(NAME, 1, catalog=url).version.number == 1  # through that Catalog now
    admin = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
    deadline = time.monotonic() + 5
    with admin.connect() as c:
        count = sa.text("SELECT count(*) FROM pg_stat_activity WHERE usename = :r")
        while (held := c.execute(count, {"r": role}).scalar()) and time.monotonic() < deadline:
            time.sleep(0.05)  # a closed connection's server process exits a moment later
    admin.dispose()
    assert held == 0
