"""Reader benchmark: dal vs raw pyarrow vs petastorm, pruning, shard balance, memory, cold start.

    python benchmarks/reader_bench.py                 # the full run recorded in README (~10 min, ~6 GB disk)
    python benchmarks/reader_bench.py --quick         # smaller sizes, for a smoke test

Everything is measured in one run so the ratios compare like with like. Timings are the best of 3.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import dal  # noqa: E402
from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema  # noqa: E402

FEATURES = 16
DAYS = 30
PROJECTED = ["id", "f0", "label"]


def schema() -> TensorSchema:
    fields = [TensorField("id", np.int64, (), ScalarCodec()), TensorField("ts", np.int64, (), ScalarCodec())]
    fields += [TensorField(f"f{i}", np.float32, (), ScalarCodec()) for i in range(FEATURES)]
    fields += [
        TensorField("label", np.int32, (), ScalarCodec()),
        TensorField("embedding", np.float32, (8,), NdarrayCodec()),
        TensorField("day", np.str_, (), ScalarCodec()),
    ]
    return TensorSchema("Bench", fields)


def build(rows: int) -> dal.Dataset:
    """A Petastorm dataset (so petastorm's reader can read the same files): 30 day partitions."""
    rng = np.random.default_rng(0)
    per_day = rows // DAYS
    start = datetime(2026, 1, 1, tzinfo=UTC)
    name = "bench.reader"
    for d in range(DAYS):
        n = per_day
        ids = np.arange(d * per_day, d * per_day + n)
        day = (start + timedelta(days=d)).date().isoformat()
        columns: dict[str, object] = {
            "id": ids,
            "ts": int(start.timestamp()) + d * 86400 + np.sort(rng.integers(0, 86400, n)),
            **{f"f{i}": rng.standard_normal(n).astype(np.float32) for i in range(FEATURES)},
            "label": rng.integers(0, 10, n).astype(np.int32),
            "embedding": list(rng.standard_normal((n, 8)).astype(np.float32)),
            "day": [day] * n,
        }
        dal.write(
            columns,
            name,
            format="petastorm",
            schema=schema() if d == 0 else None,
            partition_by=["day"],
            time_column="ts",
        )
    return dal.open(name)


def best(fn, repeat: int = 3) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    times, n = [], 0
    for _ in range(repeat):
        t = time.perf_counter()
        n = fn()
        times.append(time.perf_counter() - t)
    return min(times), n


def dal_projected(ds: dal.Dataset) -> int:
    return sum(b.num_rows for b in ds.select(*PROJECTED).iter_batches(65_536))


def raw_projected(files: list[str]) -> int:
    dataset = pads.dataset(files, format="parquet")
    return sum(b.num_rows for b in dataset.to_batches(columns=PROJECTED, batch_size=65_536))


def petastorm_projected(url: str) -> dict[str, float]:
    from tests.petastorm.legacy import legacy_python

    code = f"""
import time, json
from petastorm import make_batch_reader
times = []
for _ in range(3):
    t = time.perf_counter(); n = 0
    with make_batch_reader({url!r}, schema_fields={PROJECTED!r}, num_epochs=1, workers_count=2) as r:
        for b in r:
            n += len(b.id)
    times.append(time.perf_counter() - t)
print(json.dumps({{"seconds": min(times), "rows": n}}))
"""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    out = subprocess.run([str(legacy_python()), "-c", code], capture_output=True, text=True, env=env, timeout=1800)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


RSS_SCRIPT = """
import sys, time, json
import dal
ds = dal.open(sys.argv[1])
t = time.perf_counter(); rows = 0; nbytes = 0
for b in ds.scan().iter_batches(65_536):
    rows += b.num_rows; nbytes += b.nbytes
# VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so a child would report its parent's peak
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps({"rows": rows, "bytes": nbytes, "seconds": time.perf_counter() - t, "peak_rss_mb": hwm / 1024}))
"""


def big_dataset(rows: int, name: str) -> tuple[dal.Dataset, int]:
    """Random float64 columns (incompressible) as a Delta table, for the memory measurement."""
    rng = np.random.default_rng(1)
    chunk = 1_000_000
    for k in range(0, rows, chunk):
        n = min(chunk, rows - k)
        table = pa.table({f"c{i}": rng.standard_normal(n) for i in range(16)} | {"id": np.arange(k, k + n)})
        dal.write(table, name)
    ds = dal.open(name)
    return ds, ds.version.size_bytes


def rss_stream(name: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", RSS_SCRIPT, name],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        cwd=REPO,
        timeout=3600,
    )
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


COLD_SCRIPT = """
import time
t = time.perf_counter()
import dal
ds = dal.open("bench.reader")
batch = next(iter(ds.select("id", "f0", "label").iter_batches(1024)))
print(time.perf_counter() - t)
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    rows = 200_000 if args.quick else 2_000_000
    big_rows = 2_000_000 if args.quick else 33_000_000
    work = Path(args.workdir or tempfile.mkdtemp(prefix="dal-bench-"))
    os.environ["DAL_HOME"] = str(work / "home")
    os.environ.pop("DAL_CATALOG_URL", None)
    os.environ.pop("DAL_WAREHOUSE", None)
    results: list[tuple[str, str, str, str]] = []

    t = time.perf_counter()
    ds = build(rows)
    files = [f.uri for f in ds.files()]
    plan = ds.scan().plan()
    print(
        f"built {ds.count():,} rows, {len(files)} files, {len(plan)} row groups in {time.perf_counter() - t:.0f}s",
        flush=True,
    )

    raw_s, raw_n = best(lambda: raw_projected(files))
    fresh_s, _ = best(lambda: dal_projected(dal.open(ds.name)))  # a new Dataset: plans (reads footers) every time
    dal_s, dal_n = best(lambda: dal_projected(ds))  # the same opened version, as an epoch loop sees it
    assert raw_n == dal_n == ds.count()
    results.append(
        (
            "projected scan, freshly opened version (planning included) vs raw",
            f"{dal_n / fresh_s / 1e6:.1f} M rows/s",
            f"{raw_s / fresh_s:.2f}x raw",
            "-",
        )
    )
    results.append(
        (
            "projected scan, 3 columns: dal vs raw pyarrow.dataset",
            f"{dal_n / dal_s / 1e6:.1f} M rows/s vs {raw_n / raw_s / 1e6:.1f} M rows/s",
            f"{raw_s / dal_s:.2f}x raw",
            ">= 0.8x",
        )
    )
    try:
        pet = petastorm_projected(ds.petastorm_url)
        results.append(
            (
                "same through petastorm 0.13.1 make_batch_reader (legacy venv)",
                f"{pet['rows'] / pet['seconds'] / 1e6:.2f} M rows/s",
                f"dal {pet['seconds'] / dal_s:.1f}x faster",
                "dal faster",
            )
        )
    except Exception as e:  # report, do not hide
        results.append(("petastorm make_batch_reader", f"failed: {str(e).splitlines()[-1][:80]}", "-", "dal faster"))

    day = ds.window(datetime(2026, 1, 10, tzinfo=UTC), datetime(2026, 1, 11, tzinfo=UTC), column="ts")
    full_bytes, day_bytes = ds.scan().bytes_planned(), day.bytes_planned()
    results.append(
        (
            "1-day window over 30 days: bytes read vs full scan",
            f"{day_bytes / 1e6:.1f} MB vs {full_bytes / 1e6:.1f} MB",
            f"1/{full_bytes / day_bytes:.0f}",
            "<= 1/15",
        )
    )

    for world in (1, 2, 3, 8):
        counts = [ds.scan().shard(r, world).count() for r in range(world)]
        results.append(
            (
                f"shard balance, {world} rank(s): rows per rank",
                f"{min(counts):,} .. {max(counts):,}",
                f"max/min {max(counts) / min(counts):.3f}",
                "exactly equal",
            )
        )

    cold = []
    for _ in range(3):
        out = subprocess.run(
            [sys.executable, "-c", COLD_SCRIPT], capture_output=True, text=True, env=os.environ.copy(), cwd=REPO
        )
        cold.append(float(out.stdout.strip().splitlines()[-1]))
    results.append(
        (
            "cold start: new process, import + open + first batch (no JVM)",
            f"{min(cold):.2f} s (best of 3)",
            "-",
            "< 1.5 s",
        )
    )

    _, half_bytes = big_dataset(big_rows // 2, "bench.half")
    _, full_size = big_dataset(big_rows, "bench.big")
    r_half, r_full = rss_stream("bench.half"), rss_stream("bench.big")
    results.append(
        (
            f"peak RSS streaming {half_bytes / 1e9:.1f} GB on disk",
            f"{r_half['peak_rss_mb']:.0f} MB ({r_half['rows'] / r_half['seconds'] / 1e6:.1f} M rows/s)",
            "-",
            "bounded",
        )
    )
    results.append(
        (
            f"peak RSS streaming {full_size / 1e9:.1f} GB on disk",
            f"{r_full['peak_rss_mb']:.0f} MB ({r_full['rows'] / r_full['seconds'] / 1e6:.1f} M rows/s)",
            f"{r_full['peak_rss_mb'] / r_half['peak_rss_mb']:.2f}x the half-size run",
            "well under 1 GB, independent of size",
        )
    )

    width = max(len(r[0]) for r in results)
    print(f"\n| {'measure':<{width}} | result | ratio | target |\n|{'-' * (width + 2)}|---|---|---|")
    for r in results:
        print(f"| {r[0]:<{width}} | {r[1]} | {r[2]} | {r[3]} |")
    print(
        f"\n(python {sys.version.split()[0]}, pyarrow {pa.__version__}, {os.cpu_count()} cores; ru_maxrss of this process {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)"
    )


if __name__ == "__main__":
    main()
