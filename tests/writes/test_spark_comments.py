"""A Spark column's comment (``StructField.metadata["comment"]``) is its description in the catalog, and stays in
the Delta table's schema (the next register or sync reads it back)."""

from __future__ import annotations

from typing import Any

import pytest

import dal
from dal.catalog import Catalog

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_a_spark_comment_is_the_column_description(sqlite_env: Catalog, spark: Any) -> None:
    from pyspark.sql import functions as F

    df = spark.range(4).withColumn("v", F.col("id") * 2)
    df = df.withColumn("v", F.col("v").alias("v", metadata={"comment": "twice the id"}))
    dal.write(df, "sp.comments")
    schema = sqlite_env.version("sp.comments").schema
    assert [(f.name, f.description) for f in schema] == [("id", None), ("v", "twice the id")]
    dal.register("sp.again", sqlite_env.get_dataset("sp.comments").location, read_only=True)
    assert sqlite_env.version("sp.again").schema.get("v").description == "twice the id"  # type: ignore[union-attr]
