"""One location, one dataset: a catalog records no two datasets at, inside or around one location, and a catalog
that holds such records from before (written straight into its database here) writes, syncs, gc's and purges
neither of them, leaving every file as it was."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest

import dal
from dal.catalog import Catalog, DalError
from dal.catalog.errors import LocationTaken
from dal.catalog.locations import location_key, overlap
from dal.catalog.models import DatasetRow
from dal.ops import lifecycle
from tests.conftest import use_catalog
from tests.ownership.canaries import tree_hash


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("s3://b/sales/t", "s3a://b/sales/t/", True),
        ("s3://b/sales/t", "S3://b/sales//t?x=1#f", True),
        ("s3://b/sales/t", "s3://b", True),  # a bucket holds every prefix in it
        ("s3://b/sales/t", "s3://b/sales", True),
        ("s3://b/sales/t", "s3://b/sales/t/part", True),
        ("s3://b/sales/t", "s3://b/sales/t-2", False),
        ("s3://b/sales/t", "s3://other/sales/t", False),
        ("/w/t", "file:///w/t/", True),
        ("/w/t", "/w/./x/../t", True),
        ("/w/t", "/w/t2", False),
        ("/w/t", "/", True),
    ],
)
def test_locations_compare_by_place_not_by_spelling(a: str, b: str, same: bool) -> None:
    assert overlap(a, b) is same and overlap(b, a) is same
    assert (location_key(a) == location_key(b)) is (same and len(location_key(a)) == len(location_key(b)))


def test_a_location_belongs_to_one_dataset(catalog_url: str) -> None:
    cat = Catalog(catalog_url)
    cat.create_dataset("a.one", format="delta", location="s3://b/team/t")
    for other in ("s3a://b/team/t/", "s3://b/team/t/inner", "s3://b/team", "s3://b", "S3://b/team/t?x=1"):
        with pytest.raises(LocationTaken, match="'a.one'") as e:
            cat.create_dataset("m.steal", format="delta", location=other)
        assert e.value.other == "a.one"
    with pytest.raises(LocationTaken):  # read-only registrations (parquet, unique_location=False) too
        cat.create_dataset("m.alias", format="parquet", location="s3://b/team/t", unique_location=False)
    assert [d.name for d in cat.list_datasets()] == ["a.one"]
    assert cat.create_dataset("a.two", format="delta", location="s3://b/team/t-2").name == "a.two"
    # the same dataset again (exist_ok) is still itself
    assert cat.create_dataset("a.one", format="delta", location="s3://b/team/t", exist_ok=True).name == "a.one"
    assert cat.co_located("a.one") == []


def _record_beside(url: str, name: str, location: str) -> None:
    """A second record over ``location``, as a catalog from before the rule may hold (written past the API)."""
    cat = Catalog(url)
    with cat._write() as s:
        s.add(DatasetRow(name=name, format="delta", location=location, description="", owner="x",
                         time_column=None, properties={}, current_version=-1))  # fmt: skip
    cat.close()


def test_a_legacy_shared_location_is_neither_written_nor_deleted(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat = use_catalog(sqlite_url, tmp_path, monkeypatch)
    where = tmp_path / "warehouse" / "sales.victim"
    dal.write(pa.table({"a": list(range(10))}), "sales.victim", path=str(where))
    dal.write(pa.table({"a": list(range(5))}), "sales.victim", mode="overwrite")
    _record_beside(sqlite_url, "m.twin", str(where))
    assert cat.co_located("m.twin") == ["sales.victim"] and cat.co_located("sales.victim") == ["m.twin"]
    before = tree_hash(where)
    attempts = {
        "write": lambda: dal.write(pa.table({"a": [666]}), "m.twin", mode="overwrite"),
        "sync": lambda: dal.sync("m.twin"),
        "gc": lambda: lifecycle.gc("m.twin", keep_last=1, safe_age=timedelta(0)),
        "purge": lambda: lifecycle.drop("m.twin", purge=True),
        "victim write": lambda: dal.write(pa.table({"a": [1]}), "sales.victim"),
        "victim gc": lambda: lifecycle.gc("sales.victim", keep_last=1, safe_age=timedelta(0)),
    }
    for what, attempt in attempts.items():
        with pytest.raises(DalError, match="m.twin|sales.victim") as e:
            attempt()
        assert "Traceback" not in str(e.value), what
        assert tree_hash(where) == before, what
    assert dal.open("sales.victim", 0).to_arrow().num_rows == 10  # the version gc would have broken
    lifecycle.drop("m.twin")  # the way out: drop the extra record (its data stays)
    assert tree_hash(where) == before
    dal.write(pa.table({"a": [1]}), "sales.victim")
    assert dal.open("sales.victim").to_arrow().num_rows == 6
