"""Small files (issue #25): what many tiny files cost a read, and what ``dal optimize`` / ``target_file_size`` buy.

    python benchmarks/small_files_bench.py                 # 300 two-row appends; --appends N; --spark adds Spark

Rows, each measured in this run against its own baseline (best of ``--rounds``):
- ``dal.open(name, v).to_arrow()`` of the version before ``dal optimize`` (N files) vs after (1 file), and the
  time ``optimize`` itself took;
- with ``--spark``: ``dal.write`` of a 200-partition, 400-row Spark DataFrame with ``target_file_size=128 MiB``
  (coalesced before staging) vs no target (the default: 200 tasks, 200 files).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DAL_PROGRESS", "0")

import pyarrow as pa  # noqa: E402

import dal  # noqa: E402


def best(fn: Callable[[], Any], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--appends", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--spark", action="store_true")
    args = ap.parse_args()
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as d:
        os.environ["DAL_CATALOG_URL"] = f"sqlite:///{d}/catalog.db"
        os.environ["DAL_WAREHOUSE"] = f"{d}/warehouse"
        for i in range(args.appends):
            dal.write(pa.table({"id": pa.array([2 * i, 2 * i + 1], pa.int64()), "x": [i / 3, i / 7]}), "bench.small")
        old = dal.open("bench.small").version.number
        t = time.perf_counter()
        result = dal.lifecycle.optimize("bench.small")
        out["optimize_s"] = round(time.perf_counter() - t, 3)
        assert result.version is not None
        read_old = best(lambda: dal.open("bench.small", old).to_arrow(), args.rounds)
        read_new = best(lambda: dal.open("bench.small", result.version).to_arrow(), args.rounds)
        out["files_before"], out["files_after"] = result.files_before, result.files_after
        out["read_before_s"], out["read_after_s"] = round(read_old, 4), round(read_new, 4)
        out["read_ratio_before_over_after"] = round(read_old / read_new, 1)
        if args.spark:
            from dal.spark.session import get_spark

            spark = get_spark(master="local[2]")
            spark.sparkContext.setLogLevel("ERROR")

            def frame() -> Any:
                return spark.range(0, 400, numPartitions=200).selectExpr("id", "id * 2 AS twice")

            n = [0]

            def write(**kw: Any) -> None:
                n[0] += 1
                dal.write(frame(), f"bench.spark{n[0]}", **kw)

            coalesced = best(lambda: write(target_file_size=128 * 1024 * 1024), args.rounds)
            per_partition = best(write, args.rounds)
            out["spark_write_coalesced_s"], out["spark_write_200_files_s"] = (
                round(coalesced, 2),
                round(per_partition, 2),
            )
            out["spark_ratio_200_files_over_coalesced"] = round(per_partition / coalesced, 1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
