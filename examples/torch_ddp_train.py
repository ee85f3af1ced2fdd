"""Train a small model with torch DDP on one pinned version, each rank reading its own shard.

    torchrun --nproc_per_node=2 examples/torch_ddp_train.py            # gloo on CPU
    torchrun --nproc_per_node=2 examples/torch_ddp_train.py --version prod

Rank 0 resolves the version once and broadcasts the number, so every rank trains on the same immutable
data even if a new version lands while the job starts. Batches come from ``to_torch(...).loader(...)``:
two DataLoader worker processes read and decode whole chunks, the main process slices the batches.

Halfway through the last epoch every rank saves a checkpoint (model, optimiser and the loader's
``state_dict()``: pinned version, seed, epoch, rows consumed), the job "crashes", and a fresh loader
resumes from the checkpoint: the epoch finishes with exactly the rows not yet seen. The ranks then check
that their shards are disjoint and of equal size, and that the resumed epoch lost and repeated nothing.
Last, without ``.shard()`` (ranks from torch.distributed) through a DataLoader with spawned workers, they
check by row id that their shares are disjoint and cover the version.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import pyarrow as pa
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
    loader = scan.to_torch(batch_size=64).loader(num_workers=2)

    model = DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(len(FEATURES), 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    )
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01)

    def train(batch: dict[str, torch.Tensor]) -> float:
        x = torch.nan_to_num(torch.stack([batch[f].float() for f in FEATURES], dim=1))
        y = batch["label"].float().unsqueeze(1)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x), y)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        return loss.item()

    def keys(batch: dict[str, torch.Tensor]) -> list[tuple[str, int]]:
        return list(zip(batch["station"], batch["ts"].tolist(), strict=True))

    seen: set[tuple[str, int]] = set()
    checkpoint = Path(tempfile.mkdtemp(prefix="dal-ddp-")) / f"rank{rank}.pt"
    last = args.epochs - 1
    for epoch in range(args.epochs):
        loader.set_epoch(epoch)
        total, steps, rows = 0.0, 0, list[tuple[str, int]]()
        for batch in loader:
            total, steps = total + train(batch), steps + 1
            rows += keys(batch)
            if epoch == last and steps == len(loader) // 2:
                torch.save({"model": model.state_dict(), "optimiser": optimiser.state_dict(),
                            "data": loader.state_dict()}, checkpoint)  # fmt: skip
                break  # the "crash": this loader is abandoned mid-epoch
        if epoch == last:  # a fresh loader (as after a restart) resumes where the checkpoint was taken
            state = torch.load(checkpoint)
            model.load_state_dict(state["model"])
            optimiser.load_state_dict(state["optimiser"])
            loader = scan.to_torch(batch_size=64).loader(num_workers=2)
            loader.load_state_dict(state["data"])
            resumed_at = steps
            for batch in loader:
                total, steps = total + train(batch), steps + 1
                rows += keys(batch)
            # what an uninterrupted pass over this epoch gives this rank (each epoch its own order and shard)
            uninterrupted = scan.to_torch(batch_size=64)
            uninterrupted.set_epoch(epoch)
            expected = [key for batch in uninterrupted for key in keys(batch)]
            lost, repeated = len(set(expected) - set(rows)), len(rows) - len(set(rows))
            print(f"rank {rank}/{world} epoch {epoch}: resumed from a checkpoint at step {resumed_at}: "
                  f"{lost} rows lost, {repeated} repeated", flush=True)  # fmt: skip
            assert lost == repeated == 0 and rows == expected  # the same rows, in the same order
        if epoch == 0:
            seen.update(rows)
        print(f"rank {rank}/{world} epoch {epoch}: {steps} steps, mean loss {total / max(steps, 1):.4f}", flush=True)
    checkpoint.unlink()
    checkpoint.parent.rmdir()

    # without .shard(), to_torch takes rank and world size from torch.distributed (default "pad": equal counts),
    # also in DataLoader workers started by "spawn" (macOS's default; forkserver is Python 3.14's on Linux),
    # which have no process group of their own: the rank travels with the dataset
    auto = ds.select("station", "ts").to_torch(batch_size=64)
    batches = list(DataLoader(auto, batch_size=None, num_workers=2, multiprocessing_context="spawn"))
    counts: list[int | None] = [None] * world
    dist.all_gather_object(counts, len(batches))
    mine: list[list[tuple[str, int]] | None] = [None] * world
    dist.all_gather_object(mine, [key for batch in batches for key in keys(batch)])
    if rank == 0:
        print(f"batches per rank with ranks from torch.distributed: {counts}")
        assert len(set(counts)) == 1
        got = [set(m or ()) for m in mine]
        every = ds.select("station", "ts").to_arrow()  # every row of the version, read another way
        micros = pa.timestamp("us", tz=every.schema.field("ts").type.tz)  # what the tensors hold
        ts = every.column("ts").cast(micros).cast(pa.int64()).to_pylist()
        expected = set(zip(every.column("station").to_pylist(), ts, strict=True))
        shared = len(set.intersection(*got)) if world > 1 else 0
        missing = len(expected - set.union(*got))
        repeated = sum(len(m or ()) for m in mine) - sum(len(g) for g in got)
        print(f"row ids per rank with ranks from torch.distributed (spawn workers): {[len(g) for g in got]}, "
              f"shared by ranks: {shared}, missing: {missing}, repeated: {repeated}")  # fmt: skip
        assert shared == missing == repeated == 0, "ranks from torch.distributed must read disjoint, covering shares"

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
