"""dal.catalog.lite (the CLI's quick reader, no SQLAlchemy) answers exactly what Catalog answers, on SQLite and on the
real PostgreSQL, and steps aside (None) whenever Catalog must decide (missing file, out-of-date, other URLs)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from alembic import command

from dal.catalog import Catalog, DatasetNotFound, InvalidName, Schema, VersionDraft, VersionNotFound, lite, migrate
from dal.catalog.engine import make_engine
from dal.catalog.types import Field

SCHEMA = Schema((Field("id", "int64", False), Field("img", "binary", True, "uint8", (2, None, 3), "png")))


def fill(cat: Catalog) -> None:
    for name, desc in (("weather.obs", "Station readings"), ("weather.radar", "radar %_x"), ("Weather.cap", "")):
        cat.create_dataset(name, format="delta", location=f"/data/{name}", description=desc,
                           properties={"team": "wx"})  # fmt: skip
    cat.create_dataset("empty.one", format="petastorm", location="/data/e")
    for i in range(4):
        schema = SCHEMA if i < 2 else Schema((*SCHEMA.fields, Field("extra", "string")))
        cat.publish("weather.obs", VersionDraft("append", schema, 10 * i, i, 100 * i, i, partition_columns=("id",),
                                                properties={"k": i}, tags=("prod",) if i == 1 else ()))  # fmt: skip
    cat.tag("weather.obs", 3, "latest-good")
    cat.publish("weather.radar", VersionDraft("create", SCHEMA, 5))


def test_same_answers_as_catalog(catalog_url: str) -> None:
    cat = Catalog(catalog_url)
    fill(cat)
    quick = lite.connect(catalog_url)
    assert quick is not None
    try:
        for pattern in (None, "weather.*", "WEATHER", "%_x", "w?ather.obs", "nothing", "*"):
            assert quick.list_datasets(pattern) == cat.list_datasets(pattern), pattern
        assert quick.list_datasets(None, limit=2) == cat.list_datasets(None, limit=2) == cat.list_datasets()[:2]
        for name in ("weather.obs", "weather.radar", "empty.one"):
            assert quick.get_dataset(name) == cat.get_dataset(name)
            assert quick.versions(name) == cat.versions(name)
            assert quick.versions(name, limit=2) == cat.versions(name, limit=2) == cat.versions(name)[-2:]
            assert quick.tags(name) == cat.tags(name)
        assert quick.version("weather.obs") == cat.version("weather.obs")
        assert quick.version("weather.obs", "latest") == cat.version("weather.obs", "latest")
        for bad, error in (("weather.ob", DatasetNotFound), ("bad name", InvalidName)):
            with pytest.raises(error) as mine:
                quick.get_dataset(bad)
            with pytest.raises(error) as theirs:
                cat.get_dataset(bad)
            assert str(mine.value) == str(theirs.value)  # "did you mean" included
        with pytest.raises(VersionNotFound) as mine:
            quick.version("empty.one")
        with pytest.raises(VersionNotFound) as theirs:
            cat.version("empty.one")
        assert str(mine.value) == str(theirs.value)
        assert quick.dataset_names("weather.") == ["weather.obs", "weather.radar"]  # case-sensitive prefix
        assert quick.dataset_names("W") == ["Weather.cap"] and quick.dataset_names("x") == []
        assert quick.tag_names("weather.obs") == {"latest-good": 3, "prod": 1} and quick.tag_names("nope.x") == {}
    finally:
        quick.close()


def test_steps_aside_when_catalog_must_decide(
    tmp_path: Path, catalog_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "none" / "catalog.db"
    assert lite.connect(f"sqlite:///{missing}") is None and not missing.parent.exists()  # nothing created
    not_a_catalog = tmp_path / "other.db"
    sqlite3.connect(not_a_catalog).execute("CREATE TABLE t (x)").connection.close()
    assert lite.connect(f"sqlite:///{not_a_catalog}") is None
    Catalog(f"sqlite:///{tmp_path}/ok.db").close()
    assert lite.connect(f"sqlite:///{tmp_path}/ok.db") is not None
    assert lite.connect(f"sqlite:///file:{tmp_path}/ok.db?mode=ro&uri=true") is None  # URL options: Catalog's
    assert lite.connect("mysql://x/y") is None and lite.connect("sqlite://") is None
    # an out-of-date catalog (an earlier revision): Catalog refuses it with the upgrade command
    engine = make_engine(catalog_url)
    with engine.begin() as conn:
        command.upgrade(migrate._config(conn), "0002")
    engine.dispose()
    assert lite.connect(catalog_url) is None
    monkeypatch.setenv("DAL_CATALOG_RETRY_S", "0.3")  # nothing listens there: refused, retried, then given up
    assert lite.connect("postgresql://nobody@127.0.0.1:1/none") is None  # unreachable: Catalog reports it


def test_pin_resolves_exactly_what_it_can_and_leaves_the_rest_to_catalog(catalog_url: str) -> None:
    """``dal.open`` pins versions through ``pin``: the latest, a number or an existing tag give the same frozen
    values as ``Catalog.get_dataset`` and ``Catalog.version``; anything it cannot resolve exactly is None (Catalog answers)."""
    import datetime as dt

    import numpy as np

    cat = Catalog(catalog_url)
    fill(cat)
    cat.tag("weather.obs", 2, "7x")  # a tag that is not a number
    quick = lite.connect(catalog_url)
    assert quick is not None
    try:
        info = cat.get_dataset("weather.obs")
        for ref in (None, "latest", 0, 1, 3, np.int64(2), "2", " 3 ", "prod", "latest-good", "7x"):
            assert quick.pin("weather.obs", ref) == (info, cat.version("weather.obs", ref)), ref
        assert quick.pin("weather.radar", None) == (cat.get_dataset("weather.radar"), cat.version("weather.radar"))
        later = cat.version("weather.obs", 3).created_at + dt.timedelta(days=1)
        for ref in (4, -1, 2**63, "no-such-tag", "bad tag!", later, later.date(), later.isoformat()):
            assert quick.pin("weather.obs", ref) is None, ref  # Catalog's to resolve or refuse
        assert quick.pin("empty.one", None) is None  # no versions: Catalog's VersionNotFound
        with pytest.raises(DatasetNotFound):
            quick.pin("weather.ob", 1)
        with pytest.raises(InvalidName):
            quick.pin("weather.obs", 1.5)
    finally:
        quick.close()
