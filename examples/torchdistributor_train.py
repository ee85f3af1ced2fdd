"""Spark-launched training: TorchDistributor runs a DDP train function on a pinned dal version.

    python examples/torchdistributor_train.py                  # 2 processes, local mode, gloo on CPU
    python examples/torchdistributor_train.py --num-processes 4 --epochs 3

The driver builds a Spark DataFrame (with an MLlib feature vector, as VectorAssembler makes), converts it
ONCE with ``dal.convert(df, name=...)`` into a named, pinned dataset version, and passes that version's
number to ``TorchDistributor.run``. Every rank opens exactly that version (a later write to the dataset
changes nothing for this job) and reads a disjoint, equal share of it: ``shard(rank, world, "drop")``
with rank and world from torch.distributed (the RANK / WORLD_SIZE torchrun sets for each process).

GPUs: with ``use_gpu=True`` Spark's accelerator-aware scheduling decides which GPUs the job gets and
TorchDistributor hands them to the ranks through ``CUDA_VISIBLE_DEVICES``:
- ``local_mode=True``: the driver's GPUs (``spark.driver.resource.gpu.amount`` and
  ``spark.driver.resource.gpu.discoveryScript``; ``sc.resources["gpu"].addresses``) — TorchDistributor
  picks ``num_processes`` of them and sets ``CUDA_VISIBLE_DEVICES`` before starting torchrun;
- ``local_mode=False``: each barrier task's GPUs (``spark.task.resource.gpu.amount``;
  ``BarrierTaskContext.get().resources()["gpu"].addresses``) become that task's ``CUDA_VISIBLE_DEVICES``.
Inside the train function a rank then uses ``torch.device("cuda", int(os.environ["LOCAL_RANK"]))``
(see ``device()`` below); the dal read is the same either way.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

FEATURES = 4


def device() -> Any:
    """This rank's device: the GPU TorchDistributor gave it (CUDA_VISIBLE_DEVICES + LOCAL_RANK), else CPU."""
    import torch

    if torch.cuda.is_available() and os.environ.get("CUDA_VISIBLE_DEVICES"):
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")


def as_matrix(column: Any) -> Any:
    """A (batch, n) float tensor from a fixed-length array column (a tensor already, or one array per row)."""
    import numpy as np
    import torch

    if isinstance(column, torch.Tensor):
        return column.float()
    return torch.as_tensor(np.stack([np.asarray(v, dtype=np.float32) for v in column]))


def train_fn(name: str, version: int, catalog_url: str, epochs: int, batch_size: int) -> dict[str, Any]:
    """Runs in every rank (a torchrun process); returns rank 0's summary to the driver."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    import dal

    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    ds = dal.open(name, version, catalog=catalog_url)  # the version the driver pinned, never "latest"
    data = ds.shard(rank, world, remainder="drop").to_torch(batch_size=batch_size)

    dev = device()
    model = DistributedDataParallel(torch.nn.Linear(FEATURES, 1).to(dev))
    optimiser = torch.optim.SGD(model.parameters(), lr=0.05)
    ids: list[int] = []
    loss = torch.tensor(0.0)
    for epoch in range(epochs):
        data.set_epoch(epoch)
        for batch in data:
            x = as_matrix(batch["features"]).to(dev)
            y = batch["label"].float().unsqueeze(1).to(dev)
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            if epoch == 0:
                ids += [int(i) for i in batch["id"]]
    shares: list[Any] = [None] * world
    dist.all_gather_object(shares, ids)  # every rank's row ids, to show the shares are disjoint and equal
    dist.destroy_process_group()
    return {
        "version": version,
        "world": world,
        "rows_per_rank": [len(s) for s in shares],
        "rows_seen_twice": sum(len(s) for s in shares) - len({i for s in shares for i in s}),
        "loss": float(loss.detach()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="examples.spark_features")
    parser.add_argument("--rows", type=int, default=1001)
    parser.add_argument("--num-processes", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()

    from dal.spark.session import get_spark

    spark = get_spark(master="local[2]")
    spark.sparkContext.setLogLevel("ERROR")
    out = run(spark, args.dataset, args.rows, args.num_processes, args.epochs, args.batch_size)
    print(json.dumps(out))
    spark.stop()


def run(spark: Any, dataset: str, rows: int, num_processes: int, epochs: int, batch_size: int) -> dict[str, Any]:
    """Convert a DataFrame with an MLlib feature vector to a pinned version and train on it; rank 0's summary."""
    from pyspark.ml.feature import VectorAssembler
    from pyspark.ml.torch.distributor import TorchDistributor
    from pyspark.sql import functions as F

    import dal

    raw = spark.range(rows).select("id", *[(F.col("id") % (k + 3) / (k + 3)).alias(f"x{k}") for k in range(FEATURES)])
    raw = raw.withColumn("label", sum((F.col(f"x{k}") * (k + 1) for k in range(FEATURES)), F.lit(0.0)))
    df = VectorAssembler(inputCols=[f"x{k}" for k in range(FEATURES)], outputCol="features").transform(raw)

    ds = dal.convert(df.select("id", "features", "label"), name=dataset)  # pinned: name + number
    print(f"converted {ds.count()} rows as {ds.name} version {ds.number}")
    out: dict[str, Any] = TorchDistributor(num_processes=num_processes, local_mode=True, use_gpu=False).run(
        train_fn, ds.name, ds.number, dal.get_catalog().url, epochs, batch_size
    )
    return out


if __name__ == "__main__":
    main()
