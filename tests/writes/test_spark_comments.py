"""A Spark column's comment (``StructField.metadata["comment"]``) is its description in the catalog, and stays in
the Delta table's schema (the next register or sync reads it back)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import dal
from dal.catalog import Catalog

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_a_spark_comment_is_the_column_description(sqlite_env: Catalog, spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    df = spark.range(4).withColumn("v", F.col("id") * 2)
    df = df.withColumn("v", F.col("v").alias("v", metadata={"comment": "twice the id"}))
    dal.write(df, "sp.comments")
    schema = sqlite_env.version("sp.comments").schema
    assert [(f.name, f.description) for f in schema] == [("id", None), ("v", "twice the id")]
    other = Catalog(f"sqlite:///{tmp_path}/other.db")  # registered by another catalog, from the table itself
    dal.register("sp.again", sqlite_env.get_dataset("sp.comments").location, read_only=True, catalog=other)
    assert other.version("sp.again").schema.get("v").description == "twice the id"  # type: ignore[union-attr]
