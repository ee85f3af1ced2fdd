"""Parquet compression of written files (``dal.write(..., compression=…)``, ``dal.convert(..., compression=…)``,
petastorm's ``compression_codec``): every write path (delta-rs for local data, files staged for Spark, Petastorm)
writes the codec asked for, the data reads back the same, and a codec dal does not know is refused before
anything is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dal
from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema
from dal.catalog import Catalog
from dal.errors import DalError
from dal.formats.base import COMPRESSIONS, WriteOptions, commit_metadata
from dal.formats.registry import get_format

# pyarrow's names in the footer (its "lz4" is Parquet's LZ4_RAW, which pyarrow reports as LZ4)
FOOTER = {"snappy": "SNAPPY", "gzip": "GZIP", "zstd": "ZSTD", "lz4": "LZ4", "brotli": "BROTLI", "none": "UNCOMPRESSED"}
TABLE = pa.table({"id": pa.array(range(50)), "x": pa.array([i / 3 for i in range(50)]), "p": ["a", "b"] * 25})


def codecs(files: list[Any]) -> set[str]:
    """The codec of every column chunk of every file (DataFile or path)."""
    out = set()
    for f in files:
        meta = pq.ParquetFile(getattr(f, "uri", f)).metadata
        out |= {
            meta.row_group(g).column(c).compression for g in range(meta.num_row_groups) for c in range(meta.num_columns)
        }
    return out


@pytest.mark.parametrize("codec", COMPRESSIONS)
def test_delta_writes_use_the_codec_and_round_trip(codec: str, sqlite_env: Catalog, tmp_path: Path) -> None:
    dal.write(TABLE, "t.c", compression=codec.upper(), partition_by=["p"], path=str(tmp_path / "t"))
    ds = dal.open("t.c")
    assert codecs(ds.files()) == {FOOTER[codec]}
    assert ds.to_arrow().sort_by("id").select(TABLE.schema.names).equals(TABLE)


def test_uncompressed_is_an_alias_of_none(sqlite_env: Catalog) -> None:
    dal.write(TABLE, "t.u", compression="uncompressed")
    assert codecs(dal.open("t.u").files()) == {"UNCOMPRESSED"}


def test_appends_may_use_another_codec(sqlite_env: Catalog) -> None:
    dal.write(TABLE, "t.a")  # snappy, the default
    dal.write(TABLE, "t.a", compression="gzip")
    assert codecs(dal.open("t.a").files()) == {"SNAPPY", "GZIP"}
    assert dal.open("t.a").count() == 2 * TABLE.num_rows


@pytest.mark.parametrize("bad", ["lzo", "zip", "", None, 3])
def test_an_unknown_codec_is_refused_before_anything_is_written(bad: Any, sqlite_env: Catalog, tmp_path: Path) -> None:
    with pytest.raises(DalError, match="compression must be one of snappy, gzip, zstd, lz4, brotli, none"):
        dal.write(TABLE, "t.bad", compression=bad, path=str(tmp_path / "t"))
    assert not (tmp_path / "t").exists()
    assert [d.name for d in sqlite_env.list_datasets()] == []


def test_staged_files_use_the_codec(sqlite_env: Catalog, tmp_path: Path) -> None:
    """The path Spark's executors run (DeltaWrite.stage -> delta.staging), then the driver's one commit."""
    location = str(tmp_path / "staged")
    opts = WriteOptions(partition_by=("p",), commit_metadata=commit_metadata("w1"), compression="zstd")
    txn = get_format("delta").begin(location, opts, None)
    schema = txn.check(TABLE.schema)
    records = txn.stage(TABLE.select(schema.names).to_batches(max_chunksize=20))
    assert all(r["path"].endswith(".zstd.parquet") for r in records)
    txn.commit(records)
    files = sorted(tmp_path.glob("staged/**/*.parquet"))
    assert len(files) == 2 and codecs(files) == {"ZSTD"}
    got = dal.register("t.staged", location)[-1]
    assert dal.open("t.staged", got.number).to_arrow().sort_by("id").select(TABLE.schema.names).equals(TABLE)


SCHEMA = TensorSchema(
    "S", [TensorField("id", np.int64, (), ScalarCodec()), TensorField("v", np.float32, (2, 3), NdarrayCodec())]
)


@pytest.mark.parametrize("codec", ["zstd", "none"])
def test_petastorm_writes_use_the_codec(codec: str, sqlite_env: Catalog) -> None:
    rows = {"id": list(range(6)), "v": [np.full((2, 3), i, np.float32) for i in range(6)]}
    dal.write(rows, "t.pet", format="petastorm", schema=SCHEMA, compression=codec)
    ds = dal.open("t.pet")
    assert codecs(ds.files()) == {FOOTER[codec]}
    got = ds.to_arrow()
    assert got["id"].to_pylist() == list(range(6))
    assert sqlite_env.versions("t.pet")[-1].row_count == 6


def test_petastorm_refuses_an_unknown_codec_before_writing(sqlite_env: Catalog) -> None:
    with pytest.raises(DalError, match="compression must be one of"):
        dal.write({"id": [1], "v": [np.zeros((2, 3), np.float32)]}, "t.pet", format="petastorm", schema=SCHEMA,
                  compression="lzo")  # fmt: skip
    assert [d.name for d in sqlite_env.list_datasets()] == []


@pytest.mark.spark
def test_spark_writes_and_convert_use_the_codec(spark: Any, sqlite_env: Catalog, tmp_path: Path) -> None:
    df = spark.range(0, 40).selectExpr("id", "id / 4 as x")
    dal.write(df, "t.spark", compression="zstd")
    ds = dal.open("t.spark")
    assert codecs(ds.files()) == {"ZSTD"}
    assert sorted(ds.to_arrow()["id"].to_pylist()) == list(range(40))

    converted = dal.convert(df, cache_dir=str(tmp_path / "cache"), compression="gzip")
    assert codecs(converted.files()) == {"GZIP"}
    assert sorted(converted.to_arrow()["id"].to_pylist()) == list(range(40))
    # the codec is part of the cache key: another codec is another entry
    assert codecs(dal.convert(df, cache_dir=str(tmp_path / "cache")).files()) == {"SNAPPY"}
    with pytest.raises(DalError, match="compression must be one of"):
        dal.convert(df, cache_dir=str(tmp_path / "cache"), compression="lzo")


@pytest.mark.parametrize(("codec", "spark_name"), [("zstd", "zstd"), ("lz4", "lz4raw"), ("none", "uncompressed")])
def test_native_spark_delta_writes_get_the_codec_as_spark_names_it(codec: str, spark_name: str) -> None:
    from dal.formats.delta.write import DeltaWrite

    options = DeltaWrite("/tmp/t", WriteOptions(compression=codec)).spark_options()
    assert options is not None and options["compression"] == spark_name
