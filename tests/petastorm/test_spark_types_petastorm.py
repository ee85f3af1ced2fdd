"""Every Spark type petastorm holds, written from Spark into Petastorm as into Delta (issue 23, item 5).

One DataFrame holds every scalar Spark type (dates, timestamps with and without time zone and decimals
included), numeric arrays of one and two dimensions, and an MLlib vector, with NaN and nulls. ``dal.infer_schema``
gives each a petastorm dtype; the Petastorm version and the Delta version read back exactly what Spark's own
``collect()`` gives (NaN stays NaN, null stays null), and petastorm 0.13.1's ``make_reader`` (its pinned venv)
decodes the Petastorm version exactly as dal does. A Petastorm dataset's schema changes like a Delta table's
(merge adds nullable fields, a schema overwrite replaces it) and an overwrite keeps the partitioning."""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

import dal
from dal.catalog import Catalog
from dal.errors import SchemaMismatch
from tests.petastorm.legacy import run_legacy
from tests.petastorm.petastorm_values import load, mismatch

# through dal serve with SQLite behind it (not also PostgreSQL: a Spark job costs seconds, the server the same)
pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.parametrize("sqlite_or_served", ["sqlite", "served"], indirect=True),
]
NAN = float("nan")
TS = dt.datetime(2024, 2, 29, 12, 30, 1, 123456)


def all_types(spark: Any) -> Any:
    from pyspark.ml.linalg import Vectors, VectorUDT
    from pyspark.sql import types as T

    schema = T.StructType(
        [
            T.StructField("id", T.LongType(), nullable=False),
            T.StructField("b", T.ByteType()),
            T.StructField("sh", T.ShortType()),
            T.StructField("i", T.IntegerType()),
            T.StructField("f", T.FloatType()),
            T.StructField("d", T.DoubleType()),
            T.StructField("dec", T.DecimalType(12, 4)),
            T.StructField("s", T.StringType()),
            T.StructField("bin", T.BinaryType()),
            T.StructField("flag", T.BooleanType()),
            T.StructField("day", T.DateType()),
            T.StructField("ts", T.TimestampType()),
            T.StructField("ntz", T.TimestampNTZType()),
            T.StructField("arr_i", T.ArrayType(T.IntegerType())),
            T.StructField("arr_d", T.ArrayType(T.DoubleType())),
            T.StructField("mat", T.ArrayType(T.ArrayType(T.FloatType()))),
            T.StructField("vec", VectorUDT()),
        ]
    )
    rows = [
        (0, -128, -32768, 2**31 - 1, 1.5, -2.25, Decimal("-12345678.1234"), "é" * 20, b"\x00\xff", True,
         dt.date(1, 1, 1), TS.replace(tzinfo=dt.UTC), TS, [1, 2, 3], [0.5, NAN], [[1.0, 2.0], [3.0, NAN]],
         Vectors.dense([1.0, NAN])),
        (1, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None),
        (2, 127, 32767, -(2**31), NAN, NAN, Decimal("0.0001"), "", b"", False, dt.date(9999, 12, 31),
         dt.datetime(1970, 1, 1, tzinfo=dt.UTC), dt.datetime(1900, 1, 1), [], [float("inf")], [[0.0, 0.0], [0.0, -0.0]],
         Vectors.sparse(2, [1], [7.0])),
        (3, 0, 0, 0, float("-inf"), NAN, Decimal(0), "x", b"y", None, dt.date(2020, 1, 1),
         dt.datetime(2038, 1, 19, 3, 14, 8, tzinfo=dt.UTC), dt.datetime(2038, 1, 19, 3, 14, 8), [-1], [NAN, NAN, 1.0],
         [[9.0, 8.0], [7.0, 6.0]], Vectors.dense([0.0, 0.0])),
    ]  # fmt: skip
    return spark.createDataFrame(rows, schema, verifySchema=False).repartition(2)


def plain(v: Any) -> Any:
    """A value as comparable Python: lists of floats, naive UTC datetimes, bytes (NaN kept as NaN)."""
    if v is None:
        return None
    if hasattr(v, "toArray"):  # an MLlib vector
        return [float(x) for x in v.toArray()]
    if isinstance(v, np.ndarray):
        return [plain(x) for x in v.tolist()]
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, bytearray | bytes):
        return bytes(v)
    if isinstance(v, np.datetime64):
        return (
            v.astype("datetime64[us]").astype(dt.datetime)
            if v.dtype != np.dtype("datetime64[D]")
            else v.astype(dt.date)
        )
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(v, np.generic):
        return v.item()
    return v


def same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN (at any depth)."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b) and type(a) is type(b)


def differences(got: dict[int, dict[str, Any]], expected: dict[int, dict[str, Any]]) -> list[str]:
    assert sorted(got) == sorted(expected)
    out = []
    for i, row in expected.items():
        for k, v in row.items():
            if not same(plain(got[i][k]), plain(v)):
                out.append(f"id {i}, {k}: expected {plain(v)!r}, got {plain(got[i][k])!r}")
    return out


def spark_rows(df: Any) -> dict[int, dict[str, Any]]:
    return {r["id"]: r.asDict() for r in df.collect()}


def test_every_spark_type_round_trips_into_petastorm_and_delta(cat: Catalog, spark: Any, tmp_path: Path) -> None:
    df = all_types(spark)
    expected = spark_rows(df)

    schema = dal.infer_schema(df)
    kinds = {f.name: (f.dtype_name, f.shape, str(f.storage_type())) for f in schema}
    assert kinds["day"] == ("datetime64", (), "date32[day]")
    assert kinds["ts"] == ("datetime64", (), "timestamp[us, tz=UTC]")
    assert kinds["ntz"] == ("datetime64", (), "timestamp[us]")
    assert kinds["dec"] == ("decimal", (), "decimal128(12, 4)")
    assert kinds["mat"][:2] == ("float32", (2, 2)) and kinds["vec"][:2] == ("float64", (2,))

    dal.write(df, "types.pt", format="petastorm")
    dal.write(df, "types.delta")
    got = dal.open("types.pt").to_numpy()
    decoded = {int(i): {k: got[k][row] for k in got} for row, i in enumerate(got["id"])}
    # decoded as petastorm's make_reader does (checked below): a null float scalar is NaN in a float column (the
    # file holds a null: checked below too)
    as_decoded = {
        i: {k: NAN if k in ("f", "d") and v is None else v for k, v in r.items()} for i, r in expected.items()
    }
    assert not differences(decoded, as_decoded), "\n".join(differences(decoded, as_decoded))
    delta = {r["id"]: r for r in dal.open("types.delta").to_arrow().to_pylist()}
    assert not differences(delta, expected), "\n".join(differences(delta, expected))

    # NaN is stored as NaN, a null as a null: in the Parquet files themselves
    files = [pq.read_table(f.uri) for f in dal.open("types.pt").files()]
    d = [v for t in files for v in t.column("d").to_pylist()]
    assert sum(v is None for v in d) == 1 and sum(v is not None and math.isnan(v) for v in d) == 2

    # petastorm 0.13.1 decodes every value as dal does
    out = tmp_path / "read.json"
    proc = run_legacy("petastorm_read_json.py", str(out), dal.open("types.pt").petastorm_url)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (theirs,) = json.loads(out.read_text()).values()
    assert "error" not in theirs, theirs
    # petastorm cannot decode a timestamp column holding a null at all (np.datetime64(NaT) raises in its make_reader,
    # as for a dataset petastorm wrote itself: tests/petastorm/test_types_interop.py); every other field agrees
    assert set(theirs["failed_fields"]) == {"ts", "ntz"}
    problems = []
    for row, ident in enumerate(int(i) for i in got["id"]):
        for name in sorted(set(got) - set(theirs["failed_fields"])):
            why = mismatch(got[name][row], load(theirs["rows"][str(ident)][name]))
            if why:
                problems.append(f"id {ident}, {name}: {why}")
    assert not problems, "\n".join(problems[:30])


def test_a_null_inside_an_array_is_refused_naming_the_field(cat: Catalog, spark: Any) -> None:
    df = spark.createDataFrame([(1, [1, 2]), (2, [3, None])], "id long, a array<int>").coalesce(1)
    with pytest.raises(SchemaMismatch, match=r"field 'a', row 1: the array holds a null element"):
        dal.write(df, "nulls.pt", format="petastorm")
    assert cat.list_datasets() == []


def test_schema_changes_and_partitioning_of_a_spark_petastorm_dataset(cat: Catalog, spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    base = spark.range(0, 6, numPartitions=2).select(
        "id", (F.col("id") % 2).cast("string").alias("p"), (F.col("id") / 2).alias("x")
    )
    dal.write(base, "evo.pt", format="petastorm", partition_by=["p"])
    # a new column needs schema_mode='merge' (the hint says so); the merge adds it as a nullable field
    more = spark.range(6, 9).select(
        "id", F.lit("1").alias("p"), F.lit(0.5).alias("x"), F.col("id").cast("int").alias("n")
    )
    with pytest.raises(SchemaMismatch, match="schema_mode='merge'"):
        dal.write(more, "evo.pt", format="petastorm")
    v1 = dal.write(more, "evo.pt", format="petastorm", schema_mode="merge")
    assert v1.operation == "schema-change" and v1.schema.names == ("id", "p", "x", "n") and v1.row_count == 9
    assert v1.schema.get("n").nullable and v1.partition_columns == ("p",)
    got = dal.open("evo.pt").to_arrow().to_pylist()
    assert {r["id"]: r["n"] for r in got} == {**dict.fromkeys(range(6)), 6: 6, 7: 7, 8: 8}
    assert sorted(dal.open("evo.pt", 0).to_arrow().column_names) == ["id", "p", "x"]  # version 0 untouched

    # an overwrite without partition_by keeps the partitioning (as Delta does)
    v2 = dal.write(more, "evo.pt", format="petastorm", mode="overwrite")
    assert (v2.operation, v2.partition_columns, v2.row_count) == ("overwrite", ("p",), 3)

    # a schema overwrite replaces it (the DataFrame's schema inferred again); the partitioning goes with it
    other = spark.range(3).select("id", F.array(F.col("id").cast("float"), F.lit(1.0).cast("float")).alias("v"))
    with pytest.raises(SchemaMismatch, match=r"no column p: pass partition_by=\[\.\.\.\]"):
        dal.write(other, "evo.pt", format="petastorm", mode="overwrite", schema_mode="overwrite")
    v3 = dal.write(other, "evo.pt", format="petastorm", mode="overwrite", schema_mode="overwrite", partition_by=[])
    assert (v3.schema.names, v3.partition_columns, v3.row_count) == (("id", "v"), (), 3)
    assert dal.open("evo.pt").to_numpy()["v"].shape == (3, 2)

    # petastorm reads every version: the merged one's carried-over files hold the new field as nulls
    urls = [dal.open("evo.pt", n).petastorm_url for n in range(4)]
    out = tmp_path / "read.json"
    proc = run_legacy("petastorm_read_json.py", str(out), *urls)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [len(result[u].get("rows", ())) for u in urls] == [6, 9, 3, 3], result
    merged = result[urls[1]]["rows"]
    assert [load(merged[str(i)]["n"]) for i in range(6)] == [None] * 6 and load(merged["7"]["n"]) == 7
