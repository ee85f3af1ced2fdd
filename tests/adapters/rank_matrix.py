"""One rank of the deployment-shape matrix (tests/adapters/test_rank_matrix.py): which rows each rank reads.

Run by the test in two launchers, world size 2, gloo:

    python -m tests.adapters.rank_matrix mp.spawn OUT        # torch.multiprocessing.spawn: rank passed to
                                                             # init_process_group, no RANK/WORLD_SIZE env
    RANK=r WORLD_SIZE=2 LOCAL_RANK=r MASTER_ADDR=… MASTER_PORT=… python -m tests.adapters.rank_matrix env OUT
                                                             # what torchrun sets: init_process_group("gloo")

Each rank reads dataset ``matrix.rows`` (DAL_CATALOG_URL) through every path — direct iteration,
``DataLoader(data, batch_size=None, num_workers=2)``, ``data.loader(num_workers=2)``, torchdata's
``StatefulDataLoader`` — with fork / spawn / forkserver workers, the rank implicit (from
torch.distributed) or explicit (``.shard(rank, world)``), and writes the row ids it got per combination
to OUT/rank<r>.json. In the mp.spawn launch the implicit dataset is made BEFORE ``init_process_group`` (no
rank is known then: it is taken when the data is read); in the env launch after it.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

START_METHODS = ("fork", "spawn", "forkserver")
PATHS = ("DataLoader", "loader", "StatefulDataLoader")
WORKERS = 2
BATCH = 64
TIMEOUT = 300  # seconds a DataLoader waits for a batch: a hung worker fails its combination, not the run


def combinations() -> list[str]:
    """Every combination one rank reads, as "<rank mode>/<path>[/<start method>]"."""
    out = []
    for mode in ("implicit", "explicit"):
        out.append(f"{mode}/direct")
        out += [f"{mode}/{path}/{method}" for path in PATHS for method in START_METHODS]
    return out


def _ids(batches: Any) -> list[int]:
    return [int(i) for batch in batches for i in batch["id"].tolist()]


def _read(data: Any, path: str, method: str | None) -> list[int]:
    from torch.utils.data import DataLoader
    from torchdata.stateful_dataloader import StatefulDataLoader

    if path == "direct":
        return _ids(data)
    options: dict[str, Any] = {"num_workers": WORKERS, "multiprocessing_context": method, "timeout": TIMEOUT}
    if path == "DataLoader":
        return _ids(DataLoader(data, batch_size=None, **options))
    if path == "StatefulDataLoader":
        return _ids(StatefulDataLoader(data, batch_size=None, **options))
    return _ids(data.loader(persistent_workers=False, **options))


def run(rank: int, launcher: str, out: str, world: int = 2) -> None:
    """One rank: read every combination, write ``{combination: ids or "error: …"}``."""
    import torch.distributed as dist

    import dal

    # this rank's forkserver children start from a server that imported these once (as a user may preload)
    multiprocessing.set_forkserver_preload(["torch", "pyarrow.dataset", "dal.adapters.torch"])
    ds = dal.open("matrix.rows")
    made: dict[str, Callable[[], Any]] = {
        "implicit": lambda: ds.scan().to_torch(batch_size=BATCH),
        "explicit": lambda: ds.shard(rank, world).to_torch(batch_size=BATCH),
    }
    early = {}
    if launcher == "env":
        dist.init_process_group("gloo")
    else:  # made before the process group exists, with no RANK in the environment: the rank is taken when read
        early = {"implicit": made["implicit"]()}
        dist.init_process_group("gloo", rank=rank, world_size=world)
    assert (dist.get_rank(), dist.get_world_size()) == (rank, world)
    results: dict[str, Any] = {}
    for combination in combinations():
        mode, path, *method = combination.split("/")
        start = time.monotonic()
        try:
            data = early[mode] if mode in early else made[mode]()
            results[combination] = _read(data, path, method[0] if method else None)
        except Exception as e:  # recorded: the test reports every failing combination at once
            results[combination] = f"error: {type(e).__name__}: {e}\n{traceback.format_exc()[-2000:]}"
        print(f"{launcher} rank {rank}: {combination} read in {time.monotonic() - start:.1f} s", flush=True)
    Path(out, f"rank{rank}.json").write_text(json.dumps(results))
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    launcher, out = sys.argv[1], sys.argv[2]
    if launcher == "mp.spawn":
        import torch.multiprocessing as mp

        mp.spawn(run, args=(launcher, out), nprocs=2, join=True)
    else:
        run(int(os.environ["RANK"]), launcher, out, int(os.environ["WORLD_SIZE"]))


if __name__ == "__main__":
    main()
