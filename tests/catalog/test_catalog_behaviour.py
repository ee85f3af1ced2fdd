"""One behaviour suite for every catalog backend (SQLite and the real PostgreSQL)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from dal.catalog import (
    Catalog,
    CatalogError,
    DatasetExists,
    DatasetNotFound,
    Field,
    InvalidName,
    Partition,
    Schema,
    TagExists,
    VersionConflict,
    VersionDraft,
    VersionNotFound,
)
from tests.conftest import open_catalog

S1 = Schema((Field("id", "int64", False), Field("x", "double")))
S2 = Schema((*S1.fields, Field("img", "binary", True, "uint8", (8, 8, 3), "png")))


@pytest.fixture
def cat(catalog_url_or_served: str) -> Catalog:
    c = open_catalog(catalog_url_or_served)
    yield c
    c.close()


def draft(rows: int = 10, schema: Schema = S1, **kw: object) -> VersionDraft:
    return VersionDraft(operation=str(kw.pop("operation", "append")), schema=schema, row_count=rows, **kw)  # type: ignore[arg-type]


def test_create_get_and_list(cat: Catalog) -> None:
    cat.create_dataset("weather.radar", format="delta", location="/w/radar", description="Doppler radar scans")
    cat.create_dataset("weather.station_obs", format="parquet", location="/w/obs", owner="alice")
    cat.create_dataset("vision.images", format="petastorm", location="/w/img", time_column="ts")
    ds = cat.get_dataset("vision.images")
    assert (ds.format, ds.location, ds.time_column, ds.latest_version) == ("petastorm", "/w/img", "ts", None)
    assert ds.created_at.tzinfo is not None
    assert cat.get_dataset("weather.station_obs").owner == "alice"
    assert [d.name for d in cat.list_datasets()] == ["vision.images", "weather.radar", "weather.station_obs"]
    assert [d.name for d in cat.list_datasets("weather.*")] == ["weather.radar", "weather.station_obs"]
    assert [d.name for d in cat.list_datasets("*.radar")] == ["weather.radar"]
    assert [d.name for d in cat.list_datasets("doppler")] == ["weather.radar"]  # description, case-insensitive
    assert [d.name for d in cat.list_datasets("station_")] == ["weather.station_obs"]
    # LIKE wildcards in the user's pattern are literal: '_' matches only '_', '%' matches nothing here
    assert cat.list_datasets("weather%") == []
    assert cat.list_datasets("radar_") == []


def test_create_duplicate(cat: Catalog) -> None:
    cat.create_dataset("a.b", format="delta", location="/x")
    assert cat.create_dataset("a.b", format="delta", location="/x", exist_ok=True).name == "a.b"
    with pytest.raises(DatasetExists, match="exists already"):
        cat.create_dataset("a.b", format="delta", location="/x")
    with pytest.raises(DatasetExists):
        cat.create_dataset("a.b", format="delta", location="/elsewhere", exist_ok=True)
    with pytest.raises(CatalogError, match="unknown format"):
        cat.create_dataset("a.c", format="CSV files", location="/x")


@pytest.mark.parametrize("bad", ["", "a/b", "../etc", "a..b", ".a", "a.", "a b", "a\\b", "ü", "x" * 201])
def test_bad_names_are_refused_everywhere(cat: Catalog, bad: str) -> None:
    with pytest.raises(InvalidName):
        cat.create_dataset(bad, format="delta", location="/x")
    with pytest.raises(InvalidName):
        cat.get_dataset(bad)
    assert cat.list_datasets() == []


def test_versions_are_numbered_from_zero_and_immutable(cat: Catalog) -> None:
    cat.create_dataset("d.v", format="delta", location="/x")
    v0 = cat.publish("d.v", draft(10, storage_version=0, size_bytes=100, file_count=1))
    v1 = cat.publish("d.v", draft(25, S2, storage_version=1, operation="schema-change"))
    assert (v0.number, v1.number) == (0, 1)
    assert cat.get_dataset("d.v").latest_version == 1
    assert [v.number for v in cat.versions("d.v")] == [0, 1]
    again = cat.version("d.v", 0)
    assert again == v0  # recorded exactly as published
    assert (again.row_count, again.size_bytes, again.file_count, again.storage_version) == (10, 100, 1, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        again.row_count = 3  # type: ignore[misc]
    with pytest.raises(VersionConflict, match="storage version 1 is not after"):
        cat.publish("d.v", draft(5, storage_version=1))
    with pytest.raises(VersionConflict, match="storage version 0 is not after"):
        cat.publish("d.v", draft(5, storage_version=0))
    assert [v.number for v in cat.versions("d.v")] == [0, 1]


def test_schema_is_stored_with_tensor_fields_and_diffed(cat: Catalog) -> None:
    cat.create_dataset("d.s", format="petastorm", location="/x")
    cat.publish("d.s", draft(1, S1))
    cat.publish("d.s", draft(2, S2))
    changed = Schema((Field("id", "int32", False), S2.fields[2]))
    cat.publish("d.s", draft(3, changed))
    assert cat.schema("d.s", 1) == S2
    img = cat.schema("d.s", 1).get("img")
    assert img is not None and (img.dtype, img.shape, img.codec) == ("uint8", (8, 8, 3), "png")
    d = cat.diff("d.s", 0, 1)
    assert [f.name for f in d.added] == ["img"] and not d.removed and not d.changed
    d = cat.diff("d.s", 1, 2)
    assert [f.name for f in d.removed] == ["x"]
    assert [(c.name, c.old.type, c.new.type) for c in d.changed] == [("id", "int64", "int32")]
    assert cat.diff("d.s", 1, 1).is_empty


def test_partitions_per_version(cat: Catalog) -> None:
    schema = Schema((Field("date", "string"), Field("hour", "int32"), Field("x", "double")))
    cat.create_dataset("d.p", format="delta", location="/x")
    parts = (
        Partition((("date", "2026-01-02"), ("hour", "3")), 7, 1, 700),
        Partition((("date", "2026-01-01"), ("hour", None)), 5, 2, 500),
    )
    cat.publish("d.p", draft(12, schema, partition_columns=("date", "hour"), partitions=parts))
    got = cat.partitions("d.p")
    assert [p.key for p in got] == ["date=2026-01-01/hour=__HIVE_DEFAULT_PARTITION__", "date=2026-01-02/hour=3"]
    assert {p.key: (p.row_count, p.file_count, p.size_bytes) for p in got} == {
        "date=2026-01-01/hour=__HIVE_DEFAULT_PARTITION__": (5, 2, 500),
        "date=2026-01-02/hour=3": (7, 1, 700),
    }
    assert cat.version("d.p").partition_columns == ("date", "hour")
    with pytest.raises(CatalogError, match="not in the schema"):
        cat.publish("d.p", draft(1, S1, partition_columns=("date",)))


def test_resolve_by_number_tag_and_time(cat: Catalog) -> None:
    cat.create_dataset("d.t", format="delta", location="/x")
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(3):
        cat.publish("d.t", draft(i, committed_at=t0 + timedelta(days=i), tags=("first",) if i == 0 else ()))
    cat.tag("d.t", 1, "prod")
    assert cat.version("d.t").number == 2
    assert cat.version("d.t", "latest").number == 2
    assert cat.version("d.t", "1").number == 1
    assert cat.version("d.t", "prod").number == 1
    assert cat.version("d.t", "first").tags == ("first",)
    assert cat.version("d.t", t0 + timedelta(days=1, hours=5)).number == 1
    assert cat.version("d.t", t0 + timedelta(days=1)).number == 1  # inclusive at the commit instant
    assert cat.version("d.t", datetime(2026, 1, 2, 12)).number == 1  # naive = UTC
    assert cat.version("d.t", "2026-01-03T00:00:00+00:00").number == 2
    assert cat.version("d.t", datetime(2026, 1, 2, 23, tzinfo=timezone_minus(3))).number == 2  # 02:00 UTC on the 3rd
    with pytest.raises(VersionNotFound, match="first version is from 2026-01-01"):
        cat.version("d.t", t0 - timedelta(seconds=1))
    with pytest.raises(VersionNotFound, match=r"versions are 0\.\.2"):
        cat.version("d.t", 7)
    with pytest.raises(VersionNotFound, match="did you mean 'prod'"):
        cat.version("d.t", "prdo")
    with pytest.raises(InvalidName, match="invalid version True"):  # a DalError, not a TypeError
        cat.version("d.t", True)


def timezone_minus(hours: int):  # type: ignore[no-untyped-def]
    from datetime import timezone

    return timezone(-timedelta(hours=hours))


def test_as_of_a_time_after_the_latest_version(cat: Catalog) -> None:
    """Past the latest version but not in the future: the latest; in the future: refused, naming the latest."""
    cat.create_dataset("d.f", format="delta", location="/x")
    with pytest.raises(VersionNotFound, match="in the future .*it has no versions yet"):
        cat.version("d.f", datetime.now(UTC) + timedelta(hours=1))
    t0 = datetime(2020, 1, 1, tzinfo=UTC)
    for i in range(2):
        cat.publish("d.f", draft(i, committed_at=t0 + timedelta(days=i)))
    assert cat.version("d.f", t0 + timedelta(days=30)).number == 1
    assert cat.version("d.f", datetime.now(UTC)).number == 1
    future = datetime.now(UTC) + timedelta(minutes=5)
    for ref in (future, future.isoformat(), (future + timedelta(days=1)).date()):
        with pytest.raises(
            VersionNotFound, match=r"in the future .*its latest version, 1, is from 2020-01-02T00:00:00"
        ):
            cat.version("d.f", ref)
    with pytest.raises(VersionNotFound, match="in the future"):
        cat.diff("d.f", 0, future)


def test_no_versions_yet(cat: Catalog) -> None:
    cat.create_dataset("d.empty", format="delta", location="/x")
    assert cat.versions("d.empty") == []
    with pytest.raises(VersionNotFound, match="no versions yet"):
        cat.version("d.empty")


def test_not_found_suggests_close_names(cat: Catalog) -> None:
    cat.create_dataset("weather.radar", format="delta", location="/x")
    with pytest.raises(DatasetNotFound, match=r"did you mean 'weather\.radar'") as e:
        cat.get_dataset("weather.radr")
    assert e.value.suggestions == ("weather.radar",)
    with pytest.raises(DatasetNotFound) as e:
        cat.versions("totally.different")
    assert e.value.suggestions == ()


def test_tags(cat: Catalog) -> None:
    cat.create_dataset("d.tags", format="delta", location="/x")
    for i in range(3):
        cat.publish("d.tags", draft(i))
    assert cat.tag("d.tags", 0, "prod").tags == ("prod",)
    assert cat.tag("d.tags", 0, "prod").tags == ("prod",)  # idempotent
    with pytest.raises(TagExists, match="on version 0; use --force"):
        cat.tag("d.tags", 2, "prod")
    assert cat.tag("d.tags", 2, "prod", force=True).tags == ("prod",)
    assert cat.version("d.tags", 0).tags == ()
    assert cat.version("d.tags", "prod").number == 2
    with pytest.raises(TagExists):
        cat.publish("d.tags", draft(1, tags=("prod",)))
    assert cat.get_dataset("d.tags").latest_version == 2  # the refused publish left nothing behind
    for bad in ["12", "latest", "a b", "", "x/y"]:
        with pytest.raises(InvalidName):
            cat.tag("d.tags", 1, bad)
    cat.tag("d.tags", 1, "2026-q3")
    assert cat.tags("d.tags") == {"2026-q3": 1, "prod": 2}
    cat.untag("d.tags", "prod")
    with pytest.raises(VersionNotFound):
        cat.version("d.tags", "prod")
    with pytest.raises(VersionNotFound, match="tag 'prod'"):
        cat.untag("d.tags", "prod")


def test_identical_schemas_are_shared(catalog_url: str) -> None:
    """Looks at the database's tables: on the databases only (a dal serve client has none)."""
    import sqlalchemy as sa

    cat = Catalog(catalog_url)
    cat.create_dataset("d.share", format="delta", location="/x")
    for i in range(4):
        cat.publish("d.share", draft(i, S1 if i < 3 else S2))
    with cat._engine.connect() as c:
        assert c.execute(sa.text("SELECT count(*) FROM dal_schemas")).scalar() == 2


def test_update_and_delete(cat: Catalog) -> None:
    cat.create_dataset("d.u", format="delta", location="/x")
    cat.publish("d.u", draft(1))
    assert cat.update_dataset("d.u", description="new words", time_column="ts").description == "new words"
    assert cat.get_dataset("d.u").time_column == "ts"
    cat.delete_dataset("d.u")
    with pytest.raises(DatasetNotFound):
        cat.versions("d.u")
    cat.create_dataset("d.u", format="delta", location="/x")
    assert cat.publish("d.u", draft(1)).number == 0  # numbering starts again for a new dataset
