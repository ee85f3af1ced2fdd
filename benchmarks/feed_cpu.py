"""The torch feed's CPU per row against the hand-written pyarrow -> torch loop, the rows issue #34 set targets on
(a subset of ``adapters_bench.py``'s first table, with its code: quicker, nothing else built or run).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/feed_cpu.py --work DIR [--rows 2000000] [--rounds 3]

Paths: the hand loop, ``to_torch`` iterated directly, shuffled, ``loader(num_workers=2)``, a plain
``DataLoader(to_torch(...), batch_size=None, num_workers=2)`` and DataLoader's own limit with 2 workers (an
``int`` per batch), one warm-up run each, then ``--rounds`` interleaved rounds; each path's best rows/s and
lowest CPU seconds per 1M rows of the whole process tree (``proc_cpu.tree_cpu_seconds``: workers reaped at the
end of a plain DataLoader's epoch counted).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", type=Path, required=True, help="scratch dir (reused: the dataset is built once)")
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ["DAL_HOME"] = str(args.work / "home")
    import adapters_bench as ab
    import reader_bench
    from proc_cpu import tree_cpu_seconds

    ds = ab.existing("bench.reader") or reader_bench.build(args.rows)
    files = ab.paths(ds)
    rows = ds.count()
    paths = {
        "hand-written pyarrow -> torch loop": lambda: ab.hand_torch(files),
        "to_torch, iterated directly": lambda: ab.dal_torch(ds),
        "to_torch shuffled": lambda: ab.dal_torch(ds, shuffle=True),
        "to_torch(...).loader(num_workers=2)": lambda: ab.dal_torch(ds, 2),
        "DataLoader(to_torch(...), batch_size=None, num_workers=2)": lambda: ab.dal_torch(ds, 2, plain_loader=True),
        "DataLoader's own limit, 2 workers (an int per batch)": lambda: ab.dataloader_ceiling(rows, 2),
    }
    for fn in paths.values():
        fn()
    best = dict.fromkeys(paths, 0.0)
    cpu = dict.fromkeys(paths, float("inf"))
    load = os.getloadavg()[0]
    for _ in range(args.rounds):
        for key, fn in paths.items():
            c, t = tree_cpu_seconds(), time.perf_counter()
            n = fn()
            best[key] = max(best[key], n / (time.perf_counter() - t))
            cpu[key] = min(cpu[key], (tree_cpu_seconds() - c) / n * 1e6)
    hand = "hand-written pyarrow -> torch loop"
    print(f"\n{rows:,} rows, batches of {ab.BATCH}; load average {load:.1f} / {os.getloadavg()[0]:.1f}\n")
    print("| path | rows/s | vs hand loop | CPU s / 1M rows | CPU per row vs hand loop |\n|---|---|---|---|---|")
    for key in paths:
        print(f"| {key} | {best[key] / 1e6:.2f} M | {best[key] / best[hand]:.2f}x | {cpu[key]:.3f} | "
              f"{cpu[key] / cpu[hand]:.2f}x |")  # fmt: skip
    plain, floor = list(paths)[4], list(paths)[5]
    print(f"\nplain DataLoader(num_workers=2) / DataLoader's own limit, rows/s: {best[plain] / best[floor]:.2f}x")


if __name__ == "__main__":
    main()
