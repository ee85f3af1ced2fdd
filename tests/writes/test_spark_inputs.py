"""Spark DataFrames that used to fail with a raw Java or worker error (issue 23, item 6): an MLlib vector column
holding a null (written as a null array, by dal.write to Delta and Petastorm and by dal.convert), a column named
``x.y``, a streaming DataFrame (refused before anything runs, with the foreachBatch call that works, which is
run here), and Python workers that lack pyarrow or dal (one line naming the Python the executors run and what
to set or install: a real local session whose PYSPARK_PYTHON is a bare venv)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dal
from dal.catalog import Catalog
from dal.errors import DalError, SchemaMismatch

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[2]


def vectors(spark: Any) -> Any:
    from pyspark.ml.linalg import Vectors, VectorUDT
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField("id", T.LongType()), T.StructField("v", VectorUDT())])
    rows = [(0, Vectors.dense([1.0, 2.0])), (1, None), (2, Vectors.sparse(2, [0], [5.0])), (3, None)]
    return spark.createDataFrame(rows, schema).repartition(2)


def expected_vectors(df: Any) -> dict[int, list[float] | None]:
    return {r["id"]: None if r["v"] is None else [float(x) for x in r["v"].toArray()] for r in df.collect()}


def test_a_null_vector_is_a_null_array_in_delta_petastorm_and_convert(sqlite_env: Catalog, spark: Any) -> None:
    df = vectors(spark)
    expected = expected_vectors(df)
    assert expected[1] is None and expected[2] == [5.0, 0.0]

    dal.write(df, "vec.delta")
    assert {r["id"]: r["v"] for r in dal.open("vec.delta").to_arrow().to_pylist()} == expected

    v = dal.write(df, "vec.pt", format="petastorm")
    assert v.schema.get("v").nullable and v.schema.get("v").shape == (2,)
    got = dal.open("vec.pt").to_numpy()
    assert {int(i): None if m is None else m.tolist() for i, m in zip(got["id"], got["v"], strict=True)} == expected

    converted = dal.convert(df, dtype="float64")
    assert {r["id"]: r["v"] for r in converted.to_arrow().to_pylist()} == expected


def test_a_dotted_column_name_is_written_and_converted(sqlite_env: Catalog, spark: Any) -> None:
    from pyspark.sql import functions as F

    df = spark.range(0, 5, numPartitions=2).select("id", (F.col("id") * 10).alias("x.y"), F.lit("k").alias("a`b"))
    expected = sorted((r["id"], r["x.y"], r["a`b"]) for r in df.collect())
    v = dal.write(df, "dots.delta")
    assert v.schema.names == ("id", "x.y", "a`b")
    got = dal.open("dots.delta").to_arrow()
    assert sorted(zip(*(got.column(c).to_pylist() for c in ("id", "x.y", "a`b")), strict=True)) == expected
    converted = dal.convert(df).to_arrow()
    assert sorted(zip(*(converted.column(c).to_pylist() for c in ("id", "x.y", "a`b")), strict=True)) == expected
    # Petastorm fields are Python identifiers (its readers make namedtuples): refused, by name, before writing
    with pytest.raises(SchemaMismatch, match=r"names must be Python identifiers.*'x\.y'"):
        dal.write(df, "dots.pt", format="petastorm")


FOREACH_BATCH = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {repo!r})
    import dal
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    stream = spark.readStream.schema("id long").option("recursiveFileLookup", "true").parquet({source!r})

    def each(batch, epoch):  # the recipe dal's refusal gives
        dal.write(batch, "stream.t")

    query = (stream.writeStream.foreachBatch(each).option("checkpointLocation", {checkpoint!r})
             .trigger(availableNow=True).start())
    finished = query.awaitTermination(240)
    print("FINISHED" if finished and query.exception() is None else f"NOT FINISHED {{query.exception()}}")
    spark.stop()
    """
)


def test_a_streaming_dataframe_is_refused_and_foreach_batch_writes_it(
    sqlite_env: Catalog, sqlite_url: str, spark: Any, tmp_path: Path
) -> None:
    source = tmp_path / "incoming"
    spark.range(0, 6).write.parquet(str(source / "a"))
    spark.range(6, 10).write.parquet(str(source / "b"))
    stream = spark.readStream.schema("id long").option("recursiveFileLookup", "true").parquet(str(source))
    with pytest.raises(DalError, match=r"this one is streaming .*foreachBatch\(lambda batch, epoch: dal\.write"):
        dal.write(stream, "stream.t")
    with pytest.raises(DalError, match="dal.convert writes a batch DataFrame"):
        dal.convert(stream, name="stream.t")
    assert sqlite_env.list_datasets() == []

    # The recipe runs in a process of its own: foreachBatch calls back into Python through py4j's callback
    # server, whose state in this long-lived test session's gateway other tests may have changed (in the whole
    # suite the JVM's call back was never answered and the query never finished).
    env = dict(os.environ)  # the executors run this Python (it has pyarrow and dal), as the session's do
    env |= {"DAL_CATALOG_URL": sqlite_url, "DAL_HOME": str(tmp_path / "home"), "PYSPARK_PYTHON": sys.executable}
    script = FOREACH_BATCH.format(repo=str(REPO), source=str(source), checkpoint=str(tmp_path / "checkpoint"))
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert "FINISHED" in proc.stdout.splitlines() and proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert sorted(dal.open("stream.t").to_arrow().column("id").to_pylist()) == list(range(10))


WORKERS_WITHOUT = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, {repo!r})  # the driver imports this checkout; the workers' PYTHONPATH does not name it
    import dal
    from pyspark.sql import SparkSession

    for python in sys.argv[1:]:
        os.environ["PYSPARK_PYTHON"] = python  # read when the SparkContext starts
        spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                 .config("spark.sql.session.timeZone", "UTC").getOrCreate())
        spark.sparkContext.setLogLevel("OFF")
        try:
            dal.write(spark.range(3), "w.t", path=os.path.join(os.getcwd(), "t"))
            print("WROTE")
        except dal.DalError as e:
            print("ERROR", type(e).__name__, str(e).replace(chr(10), "\\\\n"))
        spark.stop()
    """
)


@pytest.mark.slow
def test_workers_without_pyarrow_or_dal_say_which_python_runs_them(sqlite_url: str, tmp_path: Path) -> None:
    """A venv with no packages at all (executors running a bare python3), and one that reaches pyarrow, pyspark
    and numpy but not dal (a cluster without the package): each failure is one line naming that Python."""
    bare, no_dal = tmp_path / "bare", tmp_path / "no-dal"
    for venv in (bare, no_dal):
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((no_dal / "lib").glob("python*/site-packages"))
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # its .pth files (dal's) are not read
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "VIRTUAL_ENV")}
    env |= {"DAL_CATALOG_URL": sqlite_url, "DAL_HOME": str(tmp_path / "home")}
    workdir = tmp_path / "work"  # the workers' cwd: no dal package in it
    workdir.mkdir()
    check = subprocess.run([str(no_dal / "bin" / "python"), "-c", "import pyarrow, numpy; import dal"],
                           cwd=workdir, env=env, capture_output=True, text=True)  # fmt: skip
    assert "No module named 'dal'" in check.stderr  # the second venv has pyarrow, not dal
    proc = subprocess.run(
        [sys.executable, "-c", WORKERS_WITHOUT.format(repo=str(REPO)), str(bare / "bin" / "python"), str(no_dal / "bin" / "python")],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.startswith(("ERROR", "WROTE"))]
    assert proc.returncode == 0 and len(lines) == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    for line, python in zip(lines, (bare, no_dal), strict=True):
        assert line.startswith("ERROR MissingDependency Spark's Python workers cannot import "), line
        assert f"they run {python / 'bin' / 'python'} " in line and "set PYSPARK_PYTHON" in line, line
        assert "\\n" not in line and "Traceback" not in line and len(line) < 600, line
    assert "cannot import dal:" in lines[1] and "install dal-catalog into" in lines[1]
    assert not (workdir / "t" / "_delta_log").exists()  # nothing was committed


def test_float_arrays_keep_nan_in_delta_and_petastorm(sqlite_env: Catalog, spark: Any) -> None:
    df = spark.createDataFrame([(0, [1.0, float("nan")]), (1, [float("nan"), 2.0])], "id long, a array<double>")
    dal.write(df, "nanarr.delta")
    dal.write(df, "nanarr.pt", format="petastorm")
    delta = {r["id"]: r["a"] for r in dal.open("nanarr.delta").to_arrow().to_pylist()}
    assert np.isnan(delta[0][1]) and delta[0][0] == 1.0 and np.isnan(delta[1][0])
    got = dal.open("nanarr.pt").to_numpy()
    by_id = dict(zip(got["id"].tolist(), got["a"], strict=True))
    assert np.isnan(by_id[0][1]) and by_id[1][1] == 2.0
