"""The Horovod rank/size pattern with dal's sharding (horovod itself does not build here without MPI).

With Horovod:                 rank, size = hvd.rank(), hvd.size()
Here, one process per rank:   python examples/horovod_style.py --rank 0 --size 2  (and --rank 1)

Each rank opens the same pinned version, takes `.shard(rank, size)` and reads the same number of rows,
disjoint from the other ranks' — the property an allreduce-per-step loop needs to never hang.
"""

from __future__ import annotations

import argparse
import json
import os

import dal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--rank", type=int, default=int(os.environ.get("HOROVOD_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", 0)))
    )
    parser.add_argument(
        "--size", type=int, default=int(os.environ.get("HOROVOD_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE", 1)))
    )
    parser.add_argument("--dataset", default="weather.sensor_features")
    parser.add_argument("--version", default="0", help="pin one version on every rank")
    args = parser.parse_args()

    ds = dal.open(args.dataset, args.version)
    shard = ds.select("station", "ts", "temp_mean_1h").shuffle(seed=11).shard(args.rank, args.size, remainder="drop")
    rows = steps = 0
    keys = []
    for batch in shard.iter_batches(128):
        rows, steps = rows + batch.num_rows, steps + 1  # ... hvd.allreduce(gradients) would go here
        keys += [
            f"{s}@{t}" for s, t in zip(batch.column("station").to_pylist(), batch.column("ts").to_pylist(), strict=True)
        ]
    print(
        json.dumps(
            {"rank": args.rank, "size": args.size, "version": ds.number, "rows": rows, "steps": steps, "keys": keys}
        )
    )


if __name__ == "__main__":
    main()
