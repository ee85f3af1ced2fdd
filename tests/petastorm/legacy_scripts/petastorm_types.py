"""Runs in the legacy venv: petastorm 0.13.1 writes a dataset with every type it supports (Spark +
materialize_dataset), then its own make_reader reads it back. Every decoded value is dumped as JSON (no
pickle crosses the venvs), keyed by id and field, with its exact numpy dtype and bytes, so the main
environment can hold dal's decoding to petastorm's. The Unischema pickled with every protocol is dumped too.

usage: petastorm_types.py OUT_DIR VALUES_JSON PICKLES_DIR
"""

import datetime
import json
import os
import pickle
import sys
import time
from decimal import Decimal

os.environ["TZ"] = "UTC"
time.tzset()

import numpy as np  # noqa: E402
from petastorm.codecs import CompressedImageCodec, CompressedNdarrayCodec, NdarrayCodec, ScalarCodec  # noqa: E402
from petastorm.etl.dataset_metadata import materialize_dataset  # noqa: E402
from petastorm.etl.rowgroup_indexers import FieldNotNullIndexer, SingleFieldIndexer  # noqa: E402
from petastorm.etl.rowgroup_indexing import build_rowgroup_index  # noqa: E402
from petastorm.unischema import Unischema, UnischemaField, dict_to_spark_row  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import types as T  # noqa: E402
from values_json import dump, read_all  # noqa: E402

out_dir, values_path, pickles_dir = sys.argv[1], sys.argv[2], sys.argv[3]
N = 24
ARRAY_DTYPES = [
    "bool",
    "int8",
    "uint8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
]


def F(name, dtype, shape, codec, nullable=False):
    return UnischemaField(name, dtype, shape, codec, nullable)


fields = [
    F("id", np.int32, (), ScalarCodec(T.IntegerType())),
    F("part", np.str_, (), ScalarCodec(T.StringType())),
    F("flag", np.bool_, (), ScalarCodec(T.BooleanType())),
    F("i8", np.int8, (), ScalarCodec(T.ByteType())),
    F("i16", np.int16, (), ScalarCodec(T.ShortType())),
    F("u8", np.uint8, (), ScalarCodec(T.ShortType())),
    F("u16", np.uint16, (), ScalarCodec(T.IntegerType())),
    F("i64", np.int64, (), ScalarCodec(T.LongType())),
    F("f16", np.float16, (), ScalarCodec(T.FloatType())),
    F("f32", np.float32, (), ScalarCodec(T.FloatType())),
    F("f64", np.float64, (), ScalarCodec(T.DoubleType())),
    F("text", np.str_, (), ScalarCodec(T.StringType())),
    F("ts", np.datetime64, (), ScalarCodec(T.TimestampType())),
    F("day", np.datetime64, (), ScalarCodec(T.DateType())),
    F("dec", Decimal, (), ScalarCodec(T.DecimalType(12, 4))),
    F("plain", np.int64, (), None),
    F("n_i32", np.int32, (), ScalarCodec(T.IntegerType()), True),
    F("n_i8", np.int8, (), ScalarCodec(T.ByteType()), True),
    F("n_f64", np.float64, (), ScalarCodec(T.DoubleType()), True),
    F("n_text", np.str_, (), ScalarCodec(T.StringType()), True),
    F("n_flag", np.bool_, (), ScalarCodec(T.BooleanType()), True),
    F("n_ts", np.datetime64, (), ScalarCodec(T.TimestampType()), True),
    F("n_day", np.datetime64, (), ScalarCodec(T.DateType()), True),
    F("n_dec", Decimal, (), ScalarCodec(T.DecimalType(10, 2)), True),
    *[F(f"a_{d}", np.dtype(d).type, (2, 3), NdarrayCodec()) for d in ARRAY_DTYPES],
    F("a_str", np.str_, (None,), NdarrayCodec()),
    F("a_bytes", np.bytes_, (None,), NdarrayCodec()),
    F("a_dt", np.datetime64, (3,), NdarrayCodec()),
    F("a_empty", np.float32, (None,), NdarrayCodec()),
    F("a_empty_str", np.str_, (None,), NdarrayCodec()),
    F("a_nullable", np.float64, (None, 2), NdarrayCodec(), True),
    F("a_var", np.int16, (None, 2), NdarrayCodec()),
    F("c_f32", np.float32, (4, 4), CompressedNdarrayCodec()),
    F("c_str", np.str_, (None,), CompressedNdarrayCodec(), True),
    F("img_rgb", np.uint8, (8, 6, 3), CompressedImageCodec("png")),
    F("img_grey", np.uint8, (8, 6), CompressedImageCodec("png")),
    F("img_16", np.uint16, (8, 6, 3), CompressedImageCodec("png")),
    F("img_jpeg", np.uint8, (8, 6, 3), CompressedImageCodec("jpeg", 90)),
    F("img_nullable", np.uint8, (8, 6, 3), CompressedImageCodec("png"), True),
    F("img_bmp", np.uint8, (8, 6, 3), CompressedImageCodec("bmp")),
    F("img_webp", np.uint8, (8, 6, 3), CompressedImageCodec("webp")),
    F("img_tiff16", np.uint16, (8, 6), CompressedImageCodec("tiff")),
]
Schema = Unischema("AllTypes", fields)


def row(i):
    rng = np.random.default_rng(i)
    ts = datetime.datetime(2001, 2, 3, 4, 5, 6, 789012) + datetime.timedelta(days=37 * i, microseconds=13 * i)
    day = datetime.date(1969, 12, 25) + datetime.timedelta(days=11 * i)
    r = {
        "id": i,
        "part": f"p{i % 3}",
        "flag": bool(i % 2),
        "i8": np.int8(-128 + 11 * i),
        "i16": np.int16(-32768 + 2731 * i),
        "u8": np.uint8(255 - 10 * i),
        "u16": np.uint16(65535 - 2700 * i),
        "i64": np.int64(-(2**62) + i * 123456789012345),
        "f16": np.float16(i / 7 - 1.5),
        "f32": np.float32(i / 3 - 2.25),
        "f64": i / 3 - 1e10,
        "text": f"héllo {i} ✓",
        "ts": ts,
        "day": day,
        "dec": Decimal(f"{i * 1000 - 7000}.{(i * 37) % 10000:04d}"),
        "plain": np.int64(i * i),
        "n_i32": None if i % 3 == 0 else np.int32(i * 100000),
        "n_i8": None if i % 4 == 1 else np.int8(i - 12),
        "n_f64": None if i % 5 == 2 else float(i) / 8,
        "n_text": None if i % 2 == 0 else f"t{i}",
        "n_flag": None if i % 3 == 1 else bool(i % 2),
        "n_ts": None if i % 4 == 0 else ts - datetime.timedelta(hours=i),
        "n_day": None if i % 5 == 0 else day + datetime.timedelta(days=1000),
        "n_dec": None if i % 6 == 0 else Decimal(f"{i - 12}.{i:02d}"),
        "a_str": np.array([f"a{j}" * (j + 1) for j in range(i % 4)] + ["ü"], dtype=np.str_),
        "a_bytes": np.array([b"x\x00" * j for j in range(i % 3 + 1)], dtype=np.bytes_),
        "a_dt": np.array(["2020-01-01T00:00:00.001", "1960-06-01", "NaT"], dtype="datetime64[ms]") + i,
        "a_empty": np.zeros((0 if i % 2 == 0 else i % 5,), dtype=np.float32),
        "a_empty_str": np.array([], dtype=np.str_),
        "a_nullable": None if i % 3 == 2 else rng.standard_normal((i % 4, 2)),
        "a_var": rng.integers(-1000, 1000, (i % 5 + 1, 2)).astype(np.int16),
        "c_f32": rng.standard_normal((4, 4)).astype(np.float32),
        "c_str": None if i % 4 == 3 else np.array(["c"] * (i % 3), dtype=np.str_),
        "img_rgb": rng.integers(0, 256, (8, 6, 3)).astype(np.uint8),
        "img_grey": rng.integers(0, 256, (8, 6)).astype(np.uint8),
        "img_16": rng.integers(0, 65536, (8, 6, 3)).astype(np.uint16),
        "img_jpeg": rng.integers(0, 256, (8, 6, 3)).astype(np.uint8),
        "img_nullable": None if i % 2 else rng.integers(0, 256, (8, 6, 3)).astype(np.uint8),
        "img_bmp": rng.integers(0, 256, (8, 6, 3)).astype(np.uint8),
        "img_webp": rng.integers(0, 256, (8, 6, 3)).astype(np.uint8),
        "img_tiff16": rng.integers(0, 65536, (8, 6)).astype(np.uint16),
    }
    for d in ARRAY_DTYPES:
        a = rng.standard_normal((2, 3)) * 100
        if d == "bool":
            a = a > 0
        elif d.startswith("complex"):
            a = a + 1j * rng.standard_normal((2, 3))
        r[f"a_{d}"] = a.astype(d)
    return r


spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.session.timeZone", "UTC")
    .getOrCreate()
)
rows = [row(i) for i in range(N)]
with materialize_dataset(spark, "file://" + out_dir, Schema, 1):
    rdd = spark.sparkContext.parallelize(rows, 3).map(lambda r: dict_to_spark_row(Schema, r))
    spark.createDataFrame(rdd, Schema.as_spark_schema()).write.mode("overwrite").partitionBy("part").parquet(
        "file://" + out_dir
    )
# row-group indexes, pickled by Python 3 at the highest protocol into _common_metadata
indexers = [
    SingleFieldIndexer("id_index", "id"),
    SingleFieldIndexer("text_index", "text"),
    FieldNotNullIndexer("n_text_not_null", "n_text"),
]
build_rowgroup_index("file://" + out_dir, spark.sparkContext, indexers)
spark.stop()

rows_read, failed = read_all("file://" + out_dir)
# what was written into the fields petastorm cannot read back (as make_reader would have typed it)
written = {
    name: {
        str(i): dump(np.datetime64(r[name]) if isinstance(r[name], datetime.date) else r[name])
        for i, r in enumerate(rows)
    }
    for name in failed
}
with open(values_path, "w") as f:
    json.dump({"rows": rows_read, "failed_fields": failed, "written": written}, f)
os.makedirs(pickles_dir, exist_ok=True)
for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
    with open(os.path.join(pickles_dir, f"unischema.{protocol}.pickle"), "wb") as f:
        f.write(pickle.dumps(Schema, protocol=protocol))
print("READ", len(rows_read))
