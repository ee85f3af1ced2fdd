"""Horovod-on-Spark style training through Spark's barrier mode, on a pinned dal version.

    python examples/spark_barrier_train.py                 # 2 barrier tasks on local[2]

``rdd.barrier().mapPartitions(train)`` starts all ranks together (one Spark task each; Spark schedules
them all or none). In each task ``BarrierTaskContext`` gives the rank (``partitionId()``) and the world
size (``len(getTaskInfos())``), which go straight to ``shard(rank, world, "drop")``: disjoint, equal
shares of the version the driver pinned. The ranks average their gradients every step with
``BarrierTaskContext.allGather`` (Horovod's allreduce in a real job: ``hvd.init()`` in the same task).

GPUs: with ``spark.task.resource.gpu.amount`` (and the executors' ``spark.executor.resource.gpu.amount`` and
discovery script) each barrier task gets its own GPUs from Spark's accelerator-aware scheduler:
``BarrierTaskContext.get().resources()["gpu"].addresses``; set ``CUDA_VISIBLE_DEVICES`` to them (see
``gpu_addresses()``) before the framework initialises CUDA.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator
from typing import Any

FEATURES = 3


def gpu_addresses(ctx: Any) -> list[str]:
    """The GPUs Spark scheduled for this task (none without GPU resource configs); exported for CUDA."""
    resources = ctx.resources()
    addresses = list(resources["gpu"].addresses) if "gpu" in resources else []
    if addresses:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(addresses)
    return addresses


def make_train(name: str, version: int, catalog_url: str, epochs: int, batch_size: int) -> Any:
    def train(_: Iterator[Any]) -> Iterator[str]:
        import numpy as np
        from pyspark import BarrierTaskContext

        import dal

        ctx = BarrierTaskContext.get()
        rank, world = ctx.partitionId(), len(ctx.getTaskInfos())
        gpus = gpu_addresses(ctx)
        ds = dal.open(name, version, catalog=catalog_url)
        scan = ds.shard(rank, world, remainder="drop")
        w = np.zeros(FEATURES)
        ids: list[int] = []
        for epoch in range(epochs):
            for batch in scan.iter_batches(batch_size):
                x = np.stack(batch.column("features").to_numpy(zero_copy_only=False)).astype(np.float64)
                y = batch.column("label").to_numpy()
                grad = 2 * x.T @ (x @ w - y) / len(y)
                # allreduce: every rank sends its gradient, all get all of them, and apply the mean
                grads = [np.array(json.loads(g)) for g in ctx.allGather(json.dumps(grad.tolist()))]
                w -= 0.1 * np.mean(grads, axis=0)
                if epoch == 0:
                    ids += batch.column("id").to_pylist()
        yield json.dumps({"rank": rank, "world": world, "gpus": gpus, "ids": ids, "w": w.tolist()})

    return train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="examples.barrier_features")
    parser.add_argument("--rows", type=int, default=601)
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=50)
    args = parser.parse_args()

    from dal.spark.session import get_spark

    spark = get_spark(master=f"local[{args.world}]")  # a barrier stage needs a slot per rank
    spark.sparkContext.setLogLevel("ERROR")
    print(json.dumps(run(spark, args.dataset, args.rows, args.world, args.epochs, args.batch_size)))
    spark.stop()


def run(spark: Any, dataset: str, rows: int, world: int, epochs: int, batch_size: int) -> dict[str, Any]:
    """Convert a DataFrame with an MLlib feature vector to a pinned version, train ``world`` barrier ranks."""
    from pyspark.ml.feature import VectorAssembler
    from pyspark.sql import functions as F

    import dal

    raw = spark.range(rows).select("id", *[(F.col("id") % (k + 2) / (k + 2)).alias(f"x{k}") for k in range(FEATURES)])
    raw = raw.withColumn("label", F.col("x0") + 2 * F.col("x1") - F.col("x2"))
    df = VectorAssembler(inputCols=[f"x{k}" for k in range(FEATURES)], outputCol="features").transform(raw)
    # pinned once, here; mode="overwrite" (convert's default, spelled out): running the example again writes a
    # new version holding the same rows, never a second copy of them
    ds = dal.convert(df.select("id", "features", "label"), name=dataset, mode="overwrite")

    train = make_train(ds.name, ds.number, dal.get_catalog().url, epochs, batch_size)
    ranks = spark.sparkContext.parallelize(range(world), world).barrier().mapPartitions(train).collect()
    results = sorted((json.loads(r) for r in ranks), key=lambda r: r["rank"])
    shares = [r["ids"] for r in results]
    seen = [i for s in shares for i in s]
    # each rank's rows are disjoint and no row is read twice, however often the example has run before
    assert len(seen) == len(set(seen)), f"{len(seen) - len(set(seen))} rows were read twice"
    assert ds.count() == rows, f"version {ds.number} holds {ds.count()} rows, not the DataFrame's {rows}"
    return {
        "version": ds.number,
        "world": world,
        "rows_per_rank": [len(s) for s in shares],
        "rows_seen_twice": sum(len(s) for s in shares) - len({i for s in shares for i in s}),
        "same_weights": all(r["w"] == results[0]["w"] for r in results),
        "gpus": [r["gpus"] for r in results],
    }


if __name__ == "__main__":
    main()
