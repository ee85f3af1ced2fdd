"""dal.convert on a real local Spark: cache keyed by plan and options, reuse without a Spark job, MLlib
vectors as fixed-length float arrays, float precision, row-group size, name= registration, the cache's
cleanup, sharing between processes and a conversion killed after its storage commit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dal
from dal.catalog import Catalog
from dal.errors import DalError
from dal.spark import convert_cache

pytestmark = [pytest.mark.spark]
REPO = Path(__file__).resolve().parents[2]
ROWS = 200


def vectors_frame(spark: Any) -> Any:
    from pyspark.ml.linalg import Vectors

    rows = [
        (i, i / 3, Vectors.dense([i, 1.0, 2.0]) if i % 2 else Vectors.sparse(3, [1], [float(i)]), [i / 7] * 4)
        for i in range(ROWS)
    ]
    return spark.createDataFrame(rows, ["id", "x", "v", "a"])  # two partitions on local[2]


def jobs_run(spark: Any, fn: Any) -> tuple[Any, int]:
    """fn()'s result and how many Spark jobs it started."""
    sc = spark.sparkContext
    group = f"g{time.monotonic_ns()}"
    sc.setJobGroup(group, "count jobs")
    try:
        out = fn()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return out, len(sc.statusTracker().getJobIdsForGroup(group))


def test_convert_once_then_reuse_vectors_as_float_arrays(spark: Any, tmp_path: Path) -> None:
    df = vectors_frame(spark)
    root = tmp_path / "cache"
    ds = dal.convert(df, cache_dir=str(root))
    again, jobs = jobs_run(spark, lambda: dal.convert(df, cache_dir=str(root)))
    assert jobs == 0 and again.location == ds.location  # the same entry, no Spark job
    schema = ds.arrow_schema()
    assert schema.field("x").type == pa.float32()  # float32 by default, as petastorm
    assert schema.field("v").type.value_type == pa.float32() and schema.field("a").type.value_type == pa.float32()
    rows = sorted(ds.to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [r["id"] for r in rows] == list(range(ROWS))
    assert rows[4]["v"] == [0.0, 4.0, 0.0]  # sparse: expanded to its size
    assert rows[5]["v"] == [5.0, 1.0, 2.0]  # dense
    assert rows[3]["x"] == pytest.approx(1.0) and rows[7]["a"] == [1.0] * 4

    # the whole reader API: shards are disjoint, equal and cover the rows; filters apply
    shards = [sorted(ds.shard(r, 2).to_arrow()["id"].to_pylist()) for r in range(2)]
    assert len(shards[0]) == len(shards[1]) == ROWS // 2 and sorted(shards[0] + shards[1]) == list(range(ROWS))
    assert ds.filter(dal.col("id") < 10).count() == 10

    # other options: another entry; float64 keeps doubles; a small row-group size makes more row groups
    wide = dal.convert(df, cache_dir=str(root), dtype="float64", row_group_size_bytes=2048)
    assert wide.location != ds.location
    assert wide.arrow_schema().field("x").type == pa.float64()
    assert wide.arrow_schema().field("v").type.value_type == pa.float64()
    groups = [pq.ParquetFile(f.uri).metadata for f in wide.files()]
    # about 2 KiB of (uncompressed) rows per row group: 200 rows of ~80 bytes -> several per file
    assert sum(m.num_row_groups for m in groups) >= 4
    assert sum(m.num_row_groups for m in (pq.ParquetFile(f.uri).metadata for f in ds.files())) == len(ds.files())
    assert len(convert_cache.entries(root)) == 2

    # dal cache ls / clear: both are in use by this process, so clear keeps them unless --force
    from click.testing import CliRunner

    from dal.cli.app import cli

    def run(*args: str) -> str:
        done = CliRunner().invoke(cli, ["cache", *args, "--dir", str(root)])
        assert done.exit_code == 0, done.output
        return done.output

    listed = run("ls", "--json")
    assert '"rows": 200' in listed and listed.count('"key"') == 2
    assert "removed 0" in run("clear") and len(convert_cache.entries(root)) == 2
    assert "removed 2" in run("clear", "--force") and convert_cache.entries(root) == []
    assert not Path(ds.location).exists()


def test_convert_with_name_writes_a_permanent_catalog_version(spark: Any, sqlite_env: Catalog) -> None:
    df = spark.range(50).selectExpr("id", "cast(id as double) / 2 as y")
    ds = dal.convert(df, name="feats.converted")
    assert (ds.name, ds.number) == ("feats.converted", 0)
    assert sqlite_env.version("feats.converted").row_count == 50
    assert ds.arrow_schema().field("y").type == pa.float32()
    assert "warehouse" in ds.location  # the user's warehouse, not the cache
    convert_cache.release_all()  # what exit does: a named dataset is not the cache's to remove
    assert dal.open("feats.converted").count() == 50


def test_bad_arguments_are_dal_errors(spark: Any, tmp_path: Path) -> None:
    df = spark.range(3)
    with pytest.raises(DalError, match="dtype"):
        dal.convert(df, dtype="float16", cache_dir=str(tmp_path))
    with pytest.raises(DalError, match="row_group_size_bytes"):
        dal.convert(df, row_group_size_bytes=0, cache_dir=str(tmp_path))
    with pytest.raises(DalError, match="Spark DataFrame"):
        dal.convert(pa.table({"a": [1]}))  # type: ignore[arg-type]
    with pytest.raises(DalError, match="cannot open"):  # object stores are fine (test_convert_objectstore.py)
        dal.convert(df, cache_dir="nosuchscheme://bucket/cache")


def test_in_memory_frames_with_the_same_plan_text_do_not_share(spark: Any, tmp_path: Path) -> None:
    a = spark.createDataFrame([(1,)], ["n"])
    b = spark.createDataFrame([(2,)], ["n"])  # same schema, same plan shape, other data
    got = [dal.convert(d, cache_dir=str(tmp_path)).to_arrow()["n"].to_pylist() for d in (a, b)]
    assert got == [[1], [2]]


CHILD = """
import os, sys
from dal.spark.session import get_spark
import dal
spark = get_spark(master="local[1]")
spark.sparkContext.setLogLevel("ERROR")
shared = spark.range(0, 300, numPartitions=2).selectExpr("id", "id * 2 as twice")
print("SHARED", dal.convert(shared).location, flush=True)
os.environ["DAL_TEST_PAUSE"] = "after-storage-commit"  # killed here: committed, not published
dal.convert(spark.range(0, 77).selectExpr("id", "id + 1 as next"))
"""


def test_processes_share_an_entry_and_a_killed_conversion_is_never_used(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "cache"
    shared = spark.range(0, 300, numPartitions=2).selectExpr("id", "id * 2 as twice")
    mine = dal.convert(shared, cache_dir=str(root))
    paused = tmp_path / "paused"
    env = {**os.environ, "DAL_CACHE_DIR": str(root), "DAL_TEST_PAUSE_FILE": str(paused)}
    child = subprocess.Popen([sys.executable, "-c", CHILD], env=env, cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not paused.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert paused.exists(), "the child never reached the pause point"
    finally:
        child.send_signal(signal.SIGKILL)
        out = child.communicate()[0]
    # another process converting the same query over a range reused this process's entry
    assert f"SHARED {mine.location}" in out
    assert (Path(mine.location).parent / "users").is_dir()
    # the killed conversion committed its table but published nothing: no entry names it
    assert [e.folder for e in convert_cache.entries(root)] == [Path(mine.location).parent]
    abandoned = [p for p in root.iterdir() if p.is_dir() and p != Path(mine.location).parent]
    assert len(abandoned) == 1 and (abandoned[0] / "table" / "_delta_log").is_dir()
    # the same conversion here does not take it for complete: it converts afresh and sweeps it away
    ds = dal.convert(spark.range(0, 77).selectExpr("id", "id + 1 as next"), cache_dir=str(root))
    assert ds.count() == 77 and Path(ds.location).parent != abandoned[0]
    assert not abandoned[0].exists()
    # the child's exit (a kill) removed nothing of this process's entry
    assert mine.count() == 300


def test_spark_writes_store_mllib_vectors_as_float_arrays(spark: Any, sqlite_env: Catalog) -> None:
    df = vectors_frame(spark).select("id", "v")
    dal.write(df, "vec.delta")
    ds = dal.open("vec.delta")
    assert ds.arrow_schema().field("v").type.value_type == pa.float64()  # a write keeps the precision
    rows = {r["id"]: r["v"] for r in ds.to_arrow().to_pylist()}
    assert rows[4] == [0.0, 4.0, 0.0] and rows[5] == [5.0, 1.0, 2.0] and len(rows) == ROWS


def test_spark_petastorm_writes_infer_the_tensor_schema(spark: Any, sqlite_env: Catalog) -> None:
    from pyspark.ml.linalg import Vectors

    rows = [
        (i, f"n{i}", i / 2, Vectors.sparse(3, [i % 3], [1.0]), [[i, i + 1], [i + 2, i + 3]], [float(i)] * (i % 4))
        for i in range(12)
    ]
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql import types as T

    df = spark.createDataFrame(
        rows,
        T.StructType(
            [T.StructField("id", T.LongType()), T.StructField("name", T.StringType()), T.StructField("x", T.DoubleType()),
             T.StructField("v", VectorUDT()), T.StructField("img", T.ArrayType(T.ArrayType(T.IntegerType()))),
             T.StructField("rag", T.ArrayType(T.FloatType()))]
        ),
    )  # fmt: skip
    schema = dal.infer_schema(df)
    fields = {f.name: (np.dtype(f.dtype).name if f.dtype is not np.str_ else "str", f.shape, type(f.codec).__name__)
              for f in schema}  # fmt: skip
    assert fields["id"] == ("int64", (), "ScalarCodec") and fields["name"] == ("str", (), "ScalarCodec")
    assert fields["v"] == ("float64", (3,), "NdarrayCodec") and fields["img"] == ("int32", (2, 2), "NdarrayCodec")
    assert fields["rag"] == ("float32", (None,), "NdarrayCodec")  # lengths vary: a free dimension
    assert dal.infer_schema(df, shapes={"rag": (None,)}).names == schema.names
    with pytest.raises(dal.errors.SchemaMismatch, match="dimension"):
        dal.infer_schema(df, shapes={"img": (4,)})

    v = dal.write(df, "inferred.frames", format="petastorm")  # no schema=: inferred from the DataFrame
    assert v.row_count == 12
    got = dal.open("inferred.frames").to_numpy()
    order = np.argsort(got["id"])
    np.testing.assert_array_equal(got["v"][order][4], [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(got["img"][order][5], [[5, 6], [7, 8]])
    rag = [got["rag"][int(i)] for i in order]  # variable length: one array per row
    assert got["img"][order][5].dtype == np.int32 and [len(r) for r in rag[:5]] == [0, 1, 2, 3, 0]
