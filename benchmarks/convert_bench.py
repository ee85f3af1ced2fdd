"""dal.convert: first conversion vs reuse of a Spark DataFrame, and rows/s of to_torch from the result.

    python benchmarks/convert_bench.py              # 200k rows x (id, 32-float MLlib vector, label)
    python benchmarks/convert_bench.py --rows 20000 # quick

Prints one JSON object: ``first_convert_s`` (Spark job: vectors to float32 arrays, Parquet written by the
executors, one Delta commit, published into the cache), ``reuse_s`` (same DataFrame again: a lookup, no
Spark job), ``torch_rows_per_s`` (iterating ``to_torch(batch_size=256)`` over every row, one epoch,
stacking the feature arrays into a (256, 32) tensor per batch when the adapter hands them over per row),
and the machine's CPU count. ``--petastorm`` also runs petastorm 0.13.1's ``make_spark_converter`` +
``make_torch_dataloader(batch_size=256, num_epochs=1)`` on the same DataFrame in the legacy venv (Spark 3.5.9,
pyarrow 12; torch lent from this venv, see adapters_bench.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def frame(spark: object, rows: int, dim: int) -> object:
    from pyspark.ml.feature import VectorAssembler
    from pyspark.sql import functions as F

    cols = [(F.rand(seed=k) * (k + 1)).alias(f"x{k}") for k in range(dim)]
    raw = spark.range(rows).select("id", *cols).withColumn("label", F.col("x0") * 2)  # type: ignore[attr-defined]
    df = VectorAssembler(inputCols=[f"x{k}" for k in range(dim)], outputCol="features").transform(raw)
    return df.select("id", "features", "label")


LEGACY = """
import json, sys, tempfile, time
sys.path.insert(0, {here!r})
from pyspark.sql import SparkSession
from petastorm.spark import SparkDatasetConverter, make_spark_converter
from convert_bench import frame
spark = SparkSession.builder.master("local[2]").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, "file://" + tempfile.mkdtemp())
df = frame(spark, {rows}, {dim})
t = time.perf_counter(); conv = make_spark_converter(df); first = time.perf_counter() - t
t = time.perf_counter(); make_spark_converter(df); reuse = time.perf_counter() - t
best = 0.0
for _ in range(3):
    n, t = 0, time.perf_counter()
    with conv.make_torch_dataloader(batch_size=256, num_epochs=1) as loader:
        for batch in loader:
            n += len(batch["label"])
    best = max(best, n / (time.perf_counter() - t))
conv.delete()
print(json.dumps({{"first_convert_s": round(first, 2), "reuse_s": round(reuse, 4), "torch_rows_per_s": round(best), "rows": n}}))
"""


def petastorm(rows: int, dim: int) -> dict[str, object]:
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(HERE.parent))
    from adapters_bench import legacy_with_torch

    python = legacy_with_torch()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON")}
    env["PYSPARK_PYTHON"] = python
    code = LEGACY.format(here=str(HERE), rows=rows, dim=dim)
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, timeout=1800)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--petastorm", action="store_true", help="also petastorm's converter (legacy venv)")
    args = parser.parse_args()
    os.environ.setdefault("DAL_HOME", tempfile.mkdtemp(prefix="dal-convert-bench-"))

    import numpy as np
    import torch

    import dal
    from dal.spark.session import get_spark

    spark = get_spark(master="local[2]")
    spark.sparkContext.setLogLevel("ERROR")
    df = frame(spark, args.rows, args.dim)

    t = time.perf_counter()
    ds = dal.convert(df)
    first = time.perf_counter() - t
    t = time.perf_counter()
    again = dal.convert(df)
    reuse = time.perf_counter() - t
    assert again.location == ds.location

    def epoch() -> tuple[int, float]:
        rows, t0 = 0, time.perf_counter()
        for batch in ds.to_torch(batch_size=256):
            f = batch["features"]
            x = f if isinstance(f, torch.Tensor) else torch.as_tensor(np.stack(f))
            rows += x.shape[0]
        return rows, time.perf_counter() - t0

    epoch()  # warm: file metadata, plan
    rows, seconds = min((epoch() for _ in range(2)), key=lambda r: r[1])
    assert rows == args.rows, rows
    spark.stop()
    out: dict[str, object] = {
        "rows": args.rows, "dim": args.dim, "cpus": os.cpu_count(),
        "dal": {"first_convert_s": round(first, 2), "reuse_s": round(reuse, 4), "torch_rows_per_s": round(rows / seconds)},
    }  # fmt: skip
    if args.petastorm:
        out["petastorm"] = petastorm(args.rows, args.dim)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
