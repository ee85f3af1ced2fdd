"""Train a small model with torch DDP on one pinned version, each rank reading its own shard.

    torchrun --nproc_per_node=2 examples/torch_ddp_train.py            # gloo on CPU
    torchrun --nproc_per_node=2 examples/torch_ddp_train.py --version prod

Rank 0 resolves the version once and broadcasts the number, so every rank trains on the same immutable
data even if a new version lands while the job starts. The ranks then check that their shards are
disjoint and of equal size.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

import dal

FEATURES = ["temp_mean_1h", "humidity_max_1h", "temperature", "humidity"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", default="weather.sensor_features")
    parser.add_argument("--version", default=None, help="number, tag or timestamp (default: latest)")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    pinned = [dal.open(args.dataset, args.version).number if rank == 0 else None]
    dist.broadcast_object_list(pinned, src=0)
    ds = dal.open(args.dataset, pinned[0])

    # "drop": equal, disjoint shares (at most world-1 rows unused); the default "pad" re-reads them instead
    scan = ds.select(*FEATURES, "label", "station", "ts").shuffle(seed=17).shard(rank, world, remainder="drop")
    data = scan.to_torch(batch_size=64)
    loader = DataLoader(data, batch_size=None, num_workers=2)

    model = DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(len(FEATURES), 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    )
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01)
    seen: set[tuple[str, int]] = set()
    for epoch in range(args.epochs):
        data.set_epoch(epoch)
        total, steps = 0.0, 0
        for batch in loader:
            x = torch.nan_to_num(torch.stack([batch[f].float() for f in FEATURES], dim=1))
            y = batch["label"].float().unsqueeze(1)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x), y)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total, steps = total + float(loss), steps + 1
            if epoch == 0:
                seen.update(zip(batch["station"], batch["ts"].tolist(), strict=True))
        print(f"rank {rank}/{world} epoch {epoch}: {steps} steps, mean loss {total / max(steps, 1):.4f}", flush=True)

    # without .shard(), to_torch takes rank and world size from torch.distributed (default "pad": equal counts)
    auto = ds.select("station").to_torch(batch_size=64)
    counts: list[int | None] = [None] * world
    dist.all_gather_object(counts, sum(1 for _ in DataLoader(auto, batch_size=None, num_workers=2)))
    if rank == 0:
        print(f"batches per rank with ranks from torch.distributed: {counts}")
        assert len(set(counts)) == 1

    shares: list[set[tuple[str, int]] | None] = [None] * world
    dist.all_gather_object(shares, seen)
    if rank == 0:
        sizes = [len(s or ()) for s in shares]
        overlap = len(set.intersection(*[s or set() for s in shares])) if world > 1 else 0
        print(f"version {ds.number} of {ds.name}: rows per rank {sizes}, rows seen by more than one rank: {overlap}")
        assert len(set(sizes)) == 1 and overlap == 0, "shards must be equal and disjoint"
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
