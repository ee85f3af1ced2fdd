"""Column descriptions (``Field.description``): kept with each version (its properties, no catalog migration),
read back by ``Catalog`` and the lite reader alike, and absent from rows recorded before them."""

from __future__ import annotations

import pyarrow as pa

from dal.catalog import Catalog, Schema, VersionDraft, lite
from dal.catalog.rows import COLUMN_DESCRIPTIONS
from dal.catalog.types import Field
from dal.formats.catalog_schema import from_arrow

PLAIN = Schema((Field("id", "int64", False), Field("img", "binary", True, "uint8", (2, 3), "png")))


def test_descriptions_round_trip_per_version(catalog_url: str) -> None:
    cat = Catalog(catalog_url)
    cat.create_dataset("a.b", format="delta", location="/data/a.b")
    cat.publish("a.b", VersionDraft("create", PLAIN, 1))  # as recorded before descriptions existed
    cat.publish("a.b", VersionDraft("append", PLAIN.described({"id": "row id", "img": "a <b>photo</b>"}), 2))
    cat.publish("a.b", VersionDraft("append", PLAIN.described({"id": "the key"}), 3, properties={"k": 1}))
    v0, v1, v2 = cat.versions("a.b")
    assert [f.description for f in v0.schema] == [None, None] and v0.schema == PLAIN
    assert [f.description for f in v1.schema] == ["row id", "a <b>photo</b>"]
    assert [f.description for f in v2.schema] == ["the key", None]  # one schema row, descriptions per version
    assert v2.properties == {"k": 1} and COLUMN_DESCRIPTIONS not in v1.properties
    assert cat.schema("a.b", 1).fields[1].to_dict()["description"] == "a <b>photo</b>"
    assert "description" not in v0.schema.fields[0].to_dict()
    assert Field.from_dict({"name": "x", "type": "int64"}).description is None  # older JSON loads
    assert cat.diff("a.b", 0, 1).is_empty  # a description is no schema change
    quick = lite.connect(catalog_url)
    assert quick is not None
    try:
        assert quick.versions("a.b") == cat.versions("a.b") and quick.pin("a.b", 1) == (cat.get_dataset("a.b"), v1)
    finally:
        quick.close()


def test_arrow_comment_is_the_description() -> None:
    schema = pa.schema([pa.field("a", pa.int64(), metadata={"comment": "the A"}), pa.field("b", pa.string())])
    assert [f.description for f in from_arrow(schema)] == ["the A", None]
