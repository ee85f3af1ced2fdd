"""A DDP job reading through a served catalog with vended credentials (tests/serve/test_vending.py): 2 ranks
(``torch.multiprocessing.spawn``, gloo) x 2 DataLoader workers (spawn: the workers receive the pinned Dataset,
credentials included, by pickling; they never pin).

    DAL_CATALOG_URL=… DAL_TOKEN=… python -m tests.serve.vend_ranks DATASET OUT PORT

Each rank writes the row ids it read to OUT/rank<r>.json (or the error).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

WORLD = 2
WORKERS = 2


def rank_main(rank: int, name: str, out: str, port: str) -> None:
    import os

    import torch.distributed as dist
    from torch.utils.data import DataLoader

    import dal

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        ds = dal.open(name)  # one pin per rank, through the server: the vended credentials come with it
        loader = DataLoader(ds.to_torch(batch_size=8), batch_size=None, num_workers=WORKERS,
                            multiprocessing_context="spawn", timeout=120)  # fmt: skip
        ids = [int(i) for batch in loader for i in batch["id"].tolist()]
        result: object = {"ids": ids}
    except Exception as e:  # reported to the test
        result = {"error": f"{type(e).__name__}: {e}"}
    Path(out, f"rank{rank}.json").write_text(json.dumps(result))
    dist.destroy_process_group()


if __name__ == "__main__":
    import torch.multiprocessing as mp

    mp.spawn(rank_main, args=(sys.argv[1], sys.argv[2], sys.argv[3]), nprocs=WORLD, join=True)
