"""dal.convert: first conversion vs reuse of a Spark DataFrame, and rows/s of to_torch from the result.

    python benchmarks/convert_bench.py              # 200k rows x (id, 32-float MLlib vector, label)
    python benchmarks/convert_bench.py --rows 20000 # quick

Prints one JSON object: ``first_convert_s`` (Spark job: vectors to float32 arrays, Parquet written by the
executors, one Delta commit, published into the cache), ``reuse_s`` (same DataFrame again: a lookup, no
Spark job), ``torch_rows_per_s`` (iterating ``to_torch(batch_size=256)`` over every row, one epoch,
stacking the feature arrays into a (256, 32) tensor per batch when the adapter hands them over per row),
and the machine's CPU count. Not measured here: petastorm's ``make_spark_converter`` in the legacy venv.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--dim", type=int, default=32)
    args = parser.parse_args()
    os.environ.setdefault("DAL_HOME", tempfile.mkdtemp(prefix="dal-convert-bench-"))

    import numpy as np
    import torch
    from pyspark.ml.feature import VectorAssembler
    from pyspark.sql import functions as F

    import dal
    from dal.adapters.spark import get_spark

    spark = get_spark(master="local[2]")
    spark.sparkContext.setLogLevel("ERROR")
    cols = [(F.rand(seed=k) * (k + 1)).alias(f"x{k}") for k in range(args.dim)]
    raw = spark.range(args.rows).select("id", *cols).withColumn("label", F.col("x0") * 2)
    df = VectorAssembler(inputCols=[f"x{k}" for k in range(args.dim)], outputCol="features").transform(raw)
    df = df.select("id", "features", "label")

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
    print(json.dumps({
        "rows": args.rows, "dim": args.dim, "first_convert_s": round(first, 2), "reuse_s": round(reuse, 4),
        "torch_rows_per_s": round(rows / seconds), "files": len(ds.files()),
        "cpus": os.cpu_count(),
    }))  # fmt: skip
    spark.stop()


if __name__ == "__main__":
    main()
