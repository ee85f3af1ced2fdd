"""Runs in the legacy venv: petastorm writes a dataset the way its users do (Spark + materialize_dataset),
and saves the values it wrote so the main environment can compare them exactly."""

import sys

import numpy as np
from petastorm.codecs import CompressedImageCodec, CompressedNdarrayCodec, NdarrayCodec, ScalarCodec
from petastorm.etl.dataset_metadata import materialize_dataset
from petastorm.unischema import Unischema, UnischemaField, dict_to_spark_row
from pyspark.sql import SparkSession
from pyspark.sql.types import DoubleType, IntegerType, StringType

out_dir, expected_path = sys.argv[1], sys.argv[2]
Schema = Unischema(
    "LegacySchema",
    [
        UnischemaField("id", np.int32, (), ScalarCodec(IntegerType()), False),
        UnischemaField("station", np.str_, (), ScalarCodec(StringType()), False),
        UnischemaField("score", np.float64, (), ScalarCodec(DoubleType()), False),
        UnischemaField("matrix", np.float32, (3, 4), NdarrayCodec(), False),
        UnischemaField("points", np.int16, (None, 2), CompressedNdarrayCodec(), False),
        UnischemaField("image", np.uint8, (16, 12, 3), CompressedImageCodec("png"), False),
        UnischemaField("photo", np.uint8, (16, 12, 3), CompressedImageCodec("jpeg", 95), False),
        UnischemaField("mask", np.uint8, (16, 12), CompressedImageCodec("png"), False),
    ],
)

rng = np.random.default_rng(7)
rows, expected = [], {}
for i in range(20):
    smooth = np.add.outer(np.arange(16), np.arange(12)).astype(np.uint8) * 5 + i  # jpeg-friendly
    row = {
        "id": i,
        "station": "YUL" if i % 2 else "YYZ",
        "score": i / 3,
        "matrix": rng.standard_normal((3, 4)).astype(np.float32),
        "points": rng.integers(-500, 500, (i % 5 + 1, 2)).astype(np.int16),
        "image": rng.integers(0, 255, (16, 12, 3)).astype(np.uint8),
        "photo": np.stack([smooth, smooth // 2, 255 - smooth], axis=-1),
        "mask": rng.integers(0, 2, (16, 12)).astype(np.uint8) * 255,
    }
    rows.append(row)
    for k, v in row.items():
        expected[f"{k}/{i}"] = np.asarray(v)

spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
with materialize_dataset(spark, "file://" + out_dir, Schema, 1):
    rdd = spark.sparkContext.parallelize(rows, 3).map(lambda r: dict_to_spark_row(Schema, r))
    spark.createDataFrame(rdd, Schema.as_spark_schema()).write.mode("overwrite").partitionBy("station").parquet(
        "file://" + out_dir
    )
np.savez(expected_path, **expected)
print("WROTE", len(rows))
