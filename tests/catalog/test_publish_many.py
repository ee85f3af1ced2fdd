"""``Catalog.publish_many``: many versions in one transaction, on SQLite and the real PostgreSQL: the same
versions as publishing them one by one, all or nothing, and a re-run after a failure records them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.exc import IntegrityError

from dal.catalog import (
    Catalog,
    CatalogError,
    Field,
    Partition,
    Schema,
    TagExists,
    VersionConflict,
    VersionDraft,
)
from dal.catalog.models import PartitionRow, VersionRow

S1 = Schema((Field("id", "int64", False), Field("part", "string")))
S2 = Schema((*S1.fields, Field("x", "double"))).described({"x": "the new column"})
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def cat(catalog_url: str) -> Iterator[Catalog]:
    c = Catalog(catalog_url)
    yield c
    c.close()


def drafts(n: int, first: int = 0, *, tags: dict[int, tuple[str, ...]] | None = None) -> list[VersionDraft]:
    """``n`` versions (storage versions ``first``...): partitions, a schema change half-way, a tag or two."""
    out = []
    for i in range(first, first + n):
        parts = tuple(Partition((("part", f"p{k}"),), 10 * (i + 1), i + 1, 100 * (i + 1)) for k in range(3))
        out.append(
            VersionDraft(
                operation="append" if i else "create",
                schema=S1 if i < first + n // 2 else S2,
                row_count=30 * (i + 1),
                file_count=3 * (i + 1),
                size_bytes=300 * (i + 1),
                storage_version=i,
                committed_at=T0 + timedelta(minutes=i),
                partition_columns=("part",),
                partitions=parts,
                properties={"delta_version": i},
                tags=(tags or {}).get(i, ()),
            )
        )
    return out


def history(cat: Catalog, name: str) -> list[tuple[object, ...]]:
    """Every version as the catalog reads it back, with its partitions (ids and recording times left out)."""
    return [
        (v.number, v.created_at, v.operation, v.row_count, v.file_count, v.size_bytes, v.storage_version, v.schema,
         v.partition_columns, v.tags, v.properties, cat.partitions(name, v.number))
        for v in cat.versions(name)
    ]  # fmt: skip


def test_a_batch_records_what_one_by_one_publishing_does(cat: Catalog) -> None:
    cat.create_dataset("b.many", format="delta", location="/b/many")
    cat.create_dataset("b.one", format="delta", location="/b/one")
    batch = drafts(8, tags={2: ("gold",), 7: ("latest-good", "z")})
    got = cat.publish_many("b.many", batch)
    singles = [cat.publish("b.one", d) for d in batch]
    assert [v.number for v in got] == list(range(8))
    assert history(cat, "b.many") == history(cat, "b.one")
    # the values returned are the versions as read back
    assert [(v.number, v.schema, v.tags, v.properties, v.created_at) for v in got] == [
        (v.number, v.schema, v.tags, v.properties, v.created_at) for v in cat.versions("b.many")
    ]
    assert [(v.schema, v.tags) for v in got] == [(v.schema, v.tags) for v in singles]
    assert got[-1].schema.descriptions == {"x": "the new column"}
    assert cat.get_dataset("b.many").latest_version == 7
    assert cat.tags("b.many") == {"gold": 2, "latest-good": 7, "z": 7}
    # a second batch continues the numbering
    more = cat.publish_many("b.many", drafts(2, first=8))
    assert [v.number for v in more] == [8, 9]
    assert cat.publish_many("b.many", []) == []


def test_a_failing_batch_records_nothing_and_a_rerun_records_it(cat: Catalog) -> None:
    cat.create_dataset("b.atomic", format="delta", location="/b/atomic")
    cat.publish_many("b.atomic", drafts(2))
    batch = drafts(5, first=2)
    # the database refuses the fourth draft's partitions (one key twice): after three versions were inserted
    bad = batch[3]
    broken = VersionDraft(**{**bad.__dict__, "partitions": (bad.partitions[0], bad.partitions[0])})
    with pytest.raises(IntegrityError, match="dal_partitions"):
        cat.publish_many("b.atomic", [*batch[:3], broken, batch[4]])
    assert [v.number for v in cat.versions("b.atomic")] == [0, 1]
    assert cat.get_dataset("b.atomic").latest_version == 1
    with cat._write() as s:  # no orphan rows either
        assert s.query(VersionRow).count() == 2
        assert s.query(PartitionRow).count() == 6
    # a tag another version holds: refused before anything is written
    cat.tag("b.atomic", 1, "held")
    with pytest.raises(TagExists, match="held"):
        cat.publish_many("b.atomic", [batch[0], VersionDraft(**{**batch[1].__dict__, "tags": ("held",)})])
    assert cat.get_dataset("b.atomic").latest_version == 1
    # healed: the same batch again records every version
    assert [v.number for v in cat.publish_many("b.atomic", batch)] == [2, 3, 4, 5, 6]
    assert [v.storage_version for v in cat.versions("b.atomic")] == list(range(7))


def test_recorded_storage_versions_conflict_or_are_skipped(cat: Catalog) -> None:
    cat.create_dataset("b.cas", format="delta", location="/b/cas")
    cat.publish_many("b.cas", drafts(3))
    overlapping = drafts(4, first=1)  # storage versions 1..4: 1 and 2 are recorded
    with pytest.raises(VersionConflict, match="storage version 1 is not after the newest recorded storage version 2"):
        cat.publish_many("b.cas", overlapping)
    assert cat.get_dataset("b.cas").latest_version == 2
    got = cat.publish_many("b.cas", overlapping, skip_recorded=True)
    assert [(v.number, v.storage_version) for v in got] == [(3, 3), (4, 4)]
    assert cat.publish_many("b.cas", overlapping, skip_recorded=True) == []  # all recorded: nothing, no error
    with pytest.raises(VersionConflict):
        cat.publish("b.cas", drafts(1, first=4)[0])


def test_a_batch_is_checked_before_the_database_is_asked(cat: Catalog) -> None:
    cat.create_dataset("b.check", format="delta", location="/b/check")
    two = drafts(2)
    with pytest.raises(CatalogError, match="must increase"):
        cat.publish_many("b.check", [two[1], two[0]])
    with pytest.raises(CatalogError, match="asked for on two versions"):
        cat.publish_many("b.check", drafts(2, tags={0: ("t",), 1: ("t",)}))
    with pytest.raises(CatalogError, match=">= 0"):
        cat.publish_many("b.check", [two[0], VersionDraft(**{**two[1].__dict__, "row_count": -1})])
    with pytest.raises(CatalogError, match="not in the schema"):
        cat.publish_many("b.check", [two[0], VersionDraft(**{**two[1].__dict__, "partition_columns": ("nope",)})])
    assert cat.get_dataset("b.check").latest_version is None
