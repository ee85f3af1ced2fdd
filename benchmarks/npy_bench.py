"""Petastorm ``.npy`` tensor cells into PyTorch: this checkout against another (``--baseline``), interleaved.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/npy_bench.py --baseline DIR [--rows 100000] [--rounds 4]

One dataset, written once under ``--work``: ``--rows`` rows of a ``(3072,)`` uint8 tensor (a 32x32x3 image's
bytes) in an ``NdarrayCodec`` field (``np.save`` bytes per cell, as Petastorm writes) and an int32 label,
row groups of 20,000 rows; and the same rows as a Delta table whose tensor column is a
``FixedSizeList<uint8>[3072]`` (what ``peer_bench.py``'s "ten" dataset gives dal). Each run is a fresh
process iterating ``to_torch(256)`` once after one warm-up pass; runs alternate baseline / this checkout
(A B A B …) so that load elsewhere hits both alike. Reported: each side's best samples/s and lowest CPU
seconds per 1M rows (``getrusage``: every thread of the process), and their ratios. ``DIR`` holds the
other version's ``dal`` package (e.g. ``git archive <commit> dal | tar -x -C DIR``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROW_GROUP = 20_000

CHILD = """
import json, os, resource, sys, time
import dal
ds = dal.open(sys.argv[1])
def one():
    n = 0
    for batch in ds.scan().to_torch(256):
        n += batch["x"].shape[0]
    return n
one()
r = resource.getrusage(resource.RUSAGE_SELF); c = r.ru_utime + r.ru_stime; t = time.perf_counter()
n = one()
wall = time.perf_counter() - t
r = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"rows": n, "rows_per_s": n / wall, "cpu_per_mrow": (r.ru_utime + r.ru_stime - c) / n * 1e6}))
"""


def build(rows: int) -> None:
    """The Petastorm ``.npy`` dataset and its Delta twin (fixed-size lists), unless built already."""
    import numpy as np
    import pyarrow as pa

    import dal
    from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema

    try:
        dal.open("bench.npy")
        return
    except dal.DalError:
        pass
    schema = TensorSchema(
        "Npy", [TensorField("x", np.uint8, (3072,), NdarrayCodec()), TensorField("label", np.int32, (), ScalarCodec())]
    )
    rng = np.random.default_rng(0)
    for k in range(0, rows, ROW_GROUP):
        n = min(ROW_GROUP, rows - k)
        x = rng.integers(0, 255, (n, 3072), dtype=np.uint8)
        label = rng.integers(0, 10, n).astype(np.int32)
        dal.write({"x": list(x), "label": label}, "bench.npy", format="petastorm", schema=schema if k == 0 else None)
        fsl = pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), 3072)
        dal.write(pa.table({"x": fsl, "label": label}), "bench.fsl")


def run(checkout: Path, name: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run([sys.executable, "-c", CHILD, name], capture_output=True, text=True, env=env, timeout=1800)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", type=Path, required=True, help="a directory holding another dal package")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--work", type=Path, default=None, help="scratch dir (reused: datasets built once)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="dal-npy-bench-"))
    os.environ["DAL_HOME"] = str(work / "home")
    sys.path.insert(0, str(REPO))
    build(args.rows)
    sides = {"baseline": args.baseline.resolve(), "this": REPO}
    cases = [(side, name) for name in ("bench.npy", "bench.fsl") for side in sides]
    best = {c: 0.0 for c in cases}
    cpu = {c: float("inf") for c in cases}
    load = os.getloadavg()[0]
    for _ in range(args.rounds):
        for side, name in cases:
            r = run(sides[side], name)
            best[side, name] = max(best[side, name], r["rows_per_s"])
            cpu[side, name] = min(cpu[side, name], r["cpu_per_mrow"])
    print(f"\n{args.rows:,} rows, to_torch(256), best of {args.rounds} interleaved runs each; load {load:.1f} / "
          f"{os.getloadavg()[0]:.1f}\n")  # fmt: skip
    print("| dataset | side | samples/s | CPU s / 1M rows |\n|---|---|---|---|")
    for side, name in cases:
        print(f"| {name} | {side} | {best[side, name] / 1e3:.1f} k | {cpu[side, name]:.2f} |")
    for name in ("bench.npy", "bench.fsl"):
        b, t = ("baseline", name), ("this", name)
        print(f"\n{name}: this / baseline samples/s {best[t] / best[b]:.2f}x, CPU per row {cpu[t] / cpu[b]:.2f}x")
    npy, fsl = ("this", "bench.npy"), ("this", "bench.fsl")
    print(f".npy cells / Delta fixed-size lists (this checkout): samples/s {best[npy] / best[fsl]:.2f}x, "
          f"CPU per row {cpu[npy] / cpu[fsl]:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
