"""Many training processes pinning a version at once (``dal.open`` in every rank of a DDP job) against a PostgreSQL
catalog that admits few connections: every open succeeds and pins the same version, because no process keeps a
connection it is not using and a refusal for now ("too many connections") is retried with jittered backoff;
a refusal that waiting cannot cure (no such role, no such database) fails at once, with the usual error.

On the real PostgreSQL, with a role of its own (``CONNECTION LIMIT``) per test, dropped afterwards.
"""

from __future__ import annotations

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
from benchmarks.fanin import create_role, drop_role, fan_in
from benchmarks.fanin import grant_reads as grant
from dal.catalog import Catalog, CatalogUnavailable, DatasetNotFound
from tests.conftest import use_catalog

pytestmark = pytest.mark.postgres

REPO = Path(__file__).resolve().parents[2]
NAME = "fanin.data"
PROCESSES, THREADS, OPENS = 8, 4, 25  # 200 opens, 32 at once, against 5 connections


def role_url(url: str, role: str) -> str:
    return make_url(url).set(username=role).render_as_string(hide_password=False)


@pytest.fixture
def limited_role(pg_url: str) -> Iterator[tuple[str, str]]:
    """A login role that may open at most 5 connections and read the test's schema: (its URL, its name)."""
    role = f"dal_fanin_{uuid.uuid4().hex[:10]}"
    create_role(pg_url, role, 5)
    try:
        yield role_url(pg_url, role), role
    finally:
        drop_role(pg_url, role)


def grant_reads(pg_url: str, role: str) -> None:
    grant(pg_url, dict(make_url(pg_url).query)["options"].split("=", 1)[1], role)


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
    run = fan_in(str(REPO), url, NAME, PROCESSES, THREADS, OPENS, timeout=120)
    opens = run["results"]
    failures = [o for o in opens if "error" in o]
    assert len(opens) == PROCESSES * OPENS
    assert failures == [], f"{len(failures)} of {len(opens)} opens failed, e.g. {failures[0]}"
    assert {tuple(o["version"]) for o in opens} == {(latest.number, latest.storage_version, latest.row_count)}
    assert run["refused"] > 0  # the limit was reached, and waited out
    assert run["wall"] < 60, run["wall"]


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
