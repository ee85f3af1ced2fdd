"""Shared fixtures: catalog URLs for SQLite and the real PostgreSQL server, isolated per test.

Under CI=true nothing may skip: a skipped test fails the session (see pytest_sessionfinish).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from dal.catalog import Catalog

pytest_plugins = ["tests.objectstores"]  # moto S3, Azurite and GCS emulator fixtures

PG_URL = os.environ.get("DAL_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}

_skipped: list[str] = []


def _pg_available() -> str | None:
    try:
        eng = sa.create_engine(PG_URL, connect_args={"connect_timeout": 3})
        with eng.connect() as c:
            c.execute(sa.text("SELECT 1"))
        eng.dispose()
        return None
    except Exception as e:
        return (
            f"PostgreSQL at {PG_URL} does not answer ({type(e).__name__}); start it with: "
            "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"
        )


@pytest.fixture(scope="session")
def pg_server() -> str:
    problem = _pg_available()
    if problem:
        if IN_CI:
            pytest.fail(problem)
        pytest.skip(problem)
    return PG_URL


def _pg_schema_url(schema: str) -> str:
    sep = "&" if "?" in PG_URL else "?"
    return f"{PG_URL}{sep}options=-csearch_path%3D{schema}"


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL schema for one test (dropped afterwards)."""
    yield from _fresh_schema(pg_server)


@pytest.fixture
def second_pg_url(pg_server: str) -> Iterator[str]:
    """Another fresh schema on the same server: a second catalog in the same test."""
    yield from _fresh_schema(pg_server)


def _fresh_schema(pg_server: str) -> Iterator[str]:
    schema = f"dal_test_{uuid.uuid4().hex[:12]}"
    eng = sa.create_engine(pg_server)
    with eng.begin() as c:
        c.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield _pg_schema_url(schema)
    finally:
        with eng.begin() as c:
            c.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        eng.dispose()


@pytest.fixture
def sqlite_url(tmp_path: os.PathLike[str]) -> str:
    return f"sqlite:///{tmp_path}/catalog.db"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def catalog_url(request: pytest.FixtureRequest) -> str:
    """Each catalog test runs once on SQLite and once on the real PostgreSQL."""
    name = "sqlite_url" if request.param == "sqlite" else "pg_url"
    return str(request.getfixturevalue(name))


def _serve(db: str) -> Iterator[tuple[str, Catalog, str]]:
    """``dal serve`` on loopback over the empty catalog database ``db``: (its URL, a direct ``Catalog`` of ``db``,
    a token of a principal with MANAGE on ``*``)."""
    from datetime import timedelta

    from dal.catalog.auth import AuthStore
    from tests.serve.conftest import start, stop

    direct = Catalog(db)
    store = AuthStore(db)
    store.create_principal("tester")
    store.grant("tester", "MANAGE", "*")
    token = store.create_token("tester", expires_in=timedelta(days=1))[0]
    store.close()
    proc, url = start(db)
    try:
        yield url, direct, token
    finally:
        stop(proc)
        direct.close()


@pytest.fixture(scope="session")
def _served_catalog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Catalog, str]]:
    """One ``dal serve`` per session over a fresh SQLite catalog (``_serve``)."""
    root = tmp_path_factory.mktemp("served_catalog")
    yield from _serve(f"sqlite:///{root}/catalog.db")


@pytest.fixture(scope="session")
def _served_pg_catalog(pg_server: str) -> Iterator[tuple[str, Catalog, str]]:
    """One ``dal serve`` per session over a fresh PostgreSQL schema (``_serve``), dropped at the end."""
    for url in _fresh_schema(pg_server):
        yield from _serve(url)


def _emptied(served: tuple[str, Catalog, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The served catalog, empty for the test and emptied after it (a dataset left behind would still claim its
    location, which a module's shared files may be registered at by the next catalog)."""
    url, direct, token = served

    def empty() -> None:
        for d in direct.list_datasets():
            direct.delete_dataset(d.name)

    empty()
    monkeypatch.setenv("DAL_TOKEN", token)
    yield url
    empty()


@pytest.fixture
def served_url(_served_catalog: tuple[str, Catalog, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The session's ``dal serve`` catalog (SQLite behind it), emptied for this test, its token in ``$DAL_TOKEN``."""
    yield from _emptied(_served_catalog, monkeypatch)


@pytest.fixture
def served_pg_url(_served_pg_catalog: tuple[str, Catalog, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """As ``served_url``, with PostgreSQL behind the server."""
    yield from _emptied(_served_pg_catalog, monkeypatch)


SERVED = {"sqlite": "sqlite_url", "postgres": "pg_url", "served": "served_url", "served-pg": "served_pg_url"}


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        "served",
        pytest.param("served-pg", marks=pytest.mark.postgres),
    ]
)
def catalog_url_or_served(request: pytest.FixtureRequest) -> str:
    """``catalog_url``, and twice more through a ``dal serve`` catalog (``served_url``, SQLite behind the server,
    and ``served_pg_url``, PostgreSQL behind it): the same results."""
    return str(request.getfixturevalue(SERVED[request.param]))


@pytest.fixture(params=["sqlite", "served", pytest.param("served-pg", marks=pytest.mark.postgres)])
def sqlite_or_served(request: pytest.FixtureRequest) -> str:
    """A SQLite catalog, and the same test through ``dal serve`` with SQLite and with PostgreSQL behind it: for
    the tests whose subject is not the database (format, CLI, faults of the data files)."""
    return str(request.getfixturevalue(SERVED[request.param]))


# a test whose served run costs seconds (Spark jobs, fifty writes) runs through the server once, with SQLite behind
# it: ``pytest.mark.parametrize("catalog_url_or_served", NOT_SERVED_PG, indirect=True)``
NOT_SERVED_PG = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres), "served"]


def open_catalog(url: str) -> Catalog:
    """The catalog at ``url``: a database's ``Catalog``, or the client of a ``dal serve`` catalog (which has the
    methods of ``Catalog`` the served tests use)."""
    from typing import cast

    from dal.catalog import remote

    return cast(Catalog, remote.RemoteCatalog(url)) if remote.is_remote(url) else Catalog(url)


def use_catalog(url: str, tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch) -> Catalog:
    """Point dal's defaults at ``url`` and a fresh warehouse under ``tmp_path`` for one test."""
    monkeypatch.setenv("DAL_CATALOG_URL", url)
    monkeypatch.setenv("DAL_WAREHOUSE", os.path.join(tmp_path, "warehouse"))
    return open_catalog(url)


@pytest.fixture(params=["sqlite", "served"])
def sqlite_or_served_env(
    request: pytest.FixtureRequest, tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch
) -> Catalog:
    """``sqlite_env``, and the same test through ``dal serve`` (SQLite behind it): for tests of the client's side
    (faults, hostile input) where PostgreSQL behind the server would add time and nothing the catalog tests lack."""
    url = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "served_url")
    return use_catalog(url, tmp_path, monkeypatch)


@pytest.fixture
def sqlite_env(sqlite_url: str, tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch) -> Catalog:
    """dal's default catalog is a fresh SQLite file, its warehouse a fresh directory."""
    return use_catalog(sqlite_url, tmp_path, monkeypatch)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local Spark session for the whole run (starting one costs ~8 s)."""
    from dal.spark.session import get_spark

    session = get_spark(master="local[2]")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never touch the developer's real catalog or warehouse."""
    home = tmp_path_factory.mktemp("dal_home")
    monkeypatch.setenv("DAL_HOME", str(home))
    monkeypatch.delenv("DAL_CATALOG_URL", raising=False)
    monkeypatch.delenv("DAL_WAREHOUSE", raising=False)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if IN_CI and _skipped:
        print(f"\nCI=true: {len(_skipped)} test(s) skipped, which CI does not allow:")
        for nodeid in _skipped:
            print(f"  {nodeid}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def paged_reads(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Chunks sized by rows alone (every row group over 2 x ``dal.read.reader.MIN_CHUNK_ROWS`` rows is wide:
    set that floor in the test) and the tasks of the row groups read page by page (``read_pages``), recorded."""
    import dal.read.reader as reader

    monkeypatch.setattr(reader, "CHUNK_BYTES", 1)
    paged: list[Any] = []
    read_pages = reader.read_pages

    def spy(query: Any, task: Any, rows: int) -> Any:
        paged.append(task)
        return read_pages(query, task, rows)

    monkeypatch.setattr(reader, "read_pages", spy)
    return paged
