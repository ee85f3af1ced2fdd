"""Sampling and mixing: bytes read and rows/s of a 1% and a 10% sample vs a full scan, and of a 3-way mix
vs a single scan, in one run on the same data.

    python benchmarks/sampling_bench.py            # 2M rows, ~1-2 min; --rows N; --group rows per row group

Data: Parquet, 5 columns (id int64, label int64, f0 float32, f1 float64, name string), ``--group`` rows per
row group (rows uniformly spread: the sample's row-group pushdown can act). Every path is consumed as
``iter_batches(1024)`` (best of ``--rounds``, after a warm-up). Bytes read: ``rchar`` of /proc/self/io
(bytes the process read through read()/pread(), page cache included) over the measured round, and the
compressed column-chunk bytes planned (``Scan.bytes_planned``).

Mix: three datasets of rows/3 rows each, ``dal.mix(..., weights=[0.5, 0.3, 0.2], stop="shortest")``, vs one
of them scanned alone; and ``to_torch(1024)`` of each.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

BATCH = 1024


def rchar() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


def measure(fn: Callable[[], int], rounds: int) -> tuple[float, int, int, float]:
    """(best rows/s, rows, bytes read and CPU seconds of the best round) of ``fn`` (returns its rows).
    CPU seconds (all threads of the process) are steadier than wall time on a shared machine."""
    fn()  # warm-up: footers, plans, page cache
    best, rows, nbytes, cpu = 0.0, 0, 0, 0.0
    for _ in range(rounds):
        before, c, t = rchar(), time.process_time(), time.perf_counter()
        n = fn()
        rate = n / (time.perf_counter() - t)
        if rate > best:
            best, rows, nbytes, cpu = rate, n, rchar() - before, time.process_time() - c
    return best, rows, nbytes, cpu


def write(root: Path, first: int, rows: int, group: int, files: int) -> None:
    root.mkdir(parents=True)
    rng = np.random.default_rng(first)
    per = rows // files
    for k in range(files):
        ids = np.arange(first + k * per, first + (k + 1) * per)
        table = pa.table(
            {
                "id": ids,
                "label": rng.integers(0, 10, len(ids)),
                "f0": rng.random(len(ids), dtype=np.float32),
                "f1": rng.random(len(ids)),
                "name": pa.array([f"row-{i % 1000}" for i in ids]),
            }
        )
        pq.write_table(table, root / f"part-{k}.parquet", row_group_size=group)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--group", type=int, default=10_000, help="rows per row group")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="dal-sampling-bench-") as tmp:
        os.environ["DAL_CATALOG_URL"] = f"sqlite:///{tmp}/catalog.db"
        os.environ["DAL_WAREHOUSE"] = f"{tmp}/warehouse"
        import dal

        write(Path(tmp) / "main", 0, args.rows, args.group, 8)
        dal.register("bench.main", f"{tmp}/main", format="parquet")
        third = args.rows // 3
        for k in range(3):
            write(Path(tmp) / f"m{k}", 10**9 * (k + 1), third, args.group, 4)
            dal.register(f"bench.m{k}", f"{tmp}/m{k}", format="parquet")
        ds = dal.open("bench.main")

        def consume(scan: object) -> int:
            return sum(b.num_rows for b in scan.iter_batches(BATCH))  # type: ignore[attr-defined]

        print(
            f"# {args.rows:,} rows, {args.group:,}-row row groups, 5 columns, iter_batches({BATCH}), best of {args.rounds}"
        )
        print(
            "| path | rows | rows/s | time vs full scan | CPU s | bytes read (rchar) | bytes planned | bytes vs full |"
        )
        print("|---|---|---|---|---|---|---|---|")
        full_scan = ds.scan()
        cases = [
            ("full scan", full_scan),
            ("sample(0.01) (spread=4)", full_scan.sample(0.01, seed=1)),
            ("sample(0.01, spread=inf)", full_scan.sample(0.01, seed=1, spread=math.inf)),
            ("sample(0.10) (spread=4)", full_scan.sample(0.10, seed=1)),
            ("sample(rows=20_000)", full_scan.sample(rows=20_000, seed=1)),
            ("balance('label') uniform", full_scan.balance("label", seed=1)),
        ]
        full_bytes, full_time = 0, 0.0
        for name, scan in cases:
            rate, rows, nbytes, cpu = measure(lambda s=scan: consume(s), args.rounds)
            planned = scan.bytes_planned()
            full_bytes, full_time = full_bytes or nbytes, full_time or rows / rate
            print(f"| {name} | {rows:,} | {rate / 1e6:.2f} M | {rows / rate / full_time:.2f} | {cpu:.2f} "
                  f"| {nbytes / 2**20:.1f} MiB | {planned / 2**20:.1f} MiB | {nbytes / full_bytes:.3f} |")  # fmt: skip

        print()
        print(f"# mix: three datasets of {third:,} rows, weights 0.5/0.3/0.2, stop='shortest'")
        print("| path | rows | rows/s | vs single scan | CPU s |")
        print("|---|---|---|---|---|")
        members = [dal.open(f"bench.m{k}").scan() for k in range(3)]
        single = members[0]
        mixed = dal.mix(members, [0.5, 0.3, 0.2], seed=1)
        single_rate, n, _, cpu = measure(lambda: consume(single), args.rounds)
        print(f"| single scan, iter_batches | {n:,} | {single_rate / 1e6:.2f} M | 1.00 | {cpu:.2f} |")
        mix_rate, n, _, cpu = measure(lambda: consume(mixed), args.rounds)
        print(
            f"| 3-way mix, iter_batches | {n:,} | {mix_rate / 1e6:.2f} M | {mix_rate / single_rate:.2f} | {cpu:.2f} |"
        )
        try:
            import torch  # noqa: F401
        except ImportError:
            return

        def torch_rows(source: object) -> int:
            return sum(len(b["id"]) for b in source.to_torch(BATCH))  # type: ignore[attr-defined]

        single_rate, n, _, cpu = measure(lambda: torch_rows(single), args.rounds)
        print(f"| single scan, to_torch | {n:,} | {single_rate / 1e6:.2f} M | 1.00 | {cpu:.2f} |")
        mix_rate, n, _, cpu = measure(lambda: torch_rows(mixed), args.rounds)
        print(f"| 3-way mix, to_torch | {n:,} | {mix_rate / 1e6:.2f} M | {mix_rate / single_rate:.2f} | {cpu:.2f} |")


if __name__ == "__main__":
    main()
