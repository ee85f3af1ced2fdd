"""Random access (``scan.rows()``, ``to_torch_map()``) against dal's streaming read of the same rows.

    python benchmarks/random_access_bench.py            # 1M rows; --rows N; --rounds R

A Delta dataset of ``--rows`` rows (4 float32 + int32, files of 100k rows) is read as
- streaming: ``to_torch(1024)`` iterated directly (every row once, in chunks);
- sorted take: ``RowIndex.take`` of consecutive 1024-position batches (a sampler without shuffling);
- global shuffle: ``RowIndex.take`` of 1024 random positions per batch (what ``DistributedSampler(shuffle=True)``
  asks of a map-style dataset), for ``--shuffle-batches`` batches;
- the same with a 4 MiB cache (the dataset 5x larger than the cache: about one row-group decode per row);
- one row: ``RowIndex.take([i])`` at random positions.
Rows/s are the best of ``--rounds`` interleaved rounds in this process; ratios are against the streaming
row of the same run. Plan time: ``scan.rows()`` (footers, row counts).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dal


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shuffle-batches", type=int, default=50)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="dal-ra-bench-")
    import os

    os.environ["DAL_CATALOG_URL"] = f"sqlite:///{tmp}/catalog.db"
    rng = np.random.default_rng(0)
    step = 100_000
    for start in range(0, args.rows, step):
        n = min(step, args.rows - start)
        cols = {f"f{i}": rng.standard_normal(n).astype(np.float32) for i in range(4)}
        cols["label"] = np.arange(start, start + n, dtype=np.int32)
        dal.write(pa.table(cols), "ra.bench", path=f"{tmp}/ra")
    scan = dal.open("ra.bench").scan()
    t0 = time.perf_counter()
    index = scan.rows()
    plan_s = time.perf_counter() - t0
    n = len(index)
    best: dict[str, float] = {}

    def timed(name: str, rows: int, fn: object) -> None:
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        rate = rows / (time.perf_counter() - t)
        best[name] = max(best.get(name, 0.0), rate)

    def streaming() -> None:
        for _ in scan.to_torch(1024):
            pass

    def sorted_take() -> None:
        for a in range(0, n, 1024):
            index.take(np.arange(a, min(a + 1024, n)))

    def shuffled() -> None:
        for _ in range(args.shuffle_batches):
            index.take(rng.integers(0, n, 1024))

    small = dal.open("ra.bench").scan().rows()
    small.cache_bytes = 4 * 1024 * 1024  # 2 of the 10 row groups: a dataset larger than the cache

    def shuffled_uncached() -> None:
        for _ in range(max(1, args.shuffle_batches // 10)):
            small.take(rng.integers(0, n, 1024))

    def single() -> None:
        for i in rng.integers(0, n, 200):
            index.take([int(i)])

    for _ in range(args.rounds):
        timed("streaming to_torch(1024)", n, streaming)
        timed("take, sorted batches of 1024", n, sorted_take)
        timed("take, random batches of 1024 (global shuffle)", 1024 * args.shuffle_batches, shuffled)
        timed(
            "take, random batches of 1024, dataset 5x the cache",
            1024 * max(1, args.shuffle_batches // 10),
            shuffled_uncached,
        )
        timed("take, one random row", 200, single)
    base = best["streaming to_torch(1024)"]
    print(f"{n:,} rows; scan.rows() plan: {plan_s * 1000:.0f} ms")
    print("| path | rows/s | vs streaming |")
    print("|---|---|---|")
    for name, rate in best.items():
        print(f"| {name} | {rate:,.0f} | {rate / base:.3f}x |")


if __name__ == "__main__":
    main()
