"""Adapter throughput: rows/s through to_torch (DataLoader, 2 workers) and to_tf vs the raw dal scan,
and petastorm's own petastorm.pytorch.DataLoader (legacy venv), on the reader benchmark's dataset.

    python benchmarks/adapters_bench.py            # ~3 min; --quick for a smoke run

No GPU is lent to this project's runs, so the GPU row (samples/s into a small model on the GPU vs the
same model fed from in-memory tensors) is not measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import reader_bench  # noqa: E402

import dal  # noqa: E402

COLUMNS = ["f0", "f1", "f2", "f3", "label"]
BATCH = 1024


def rows_per_s(fn, repeat: int = 2) -> float:  # type: ignore[no-untyped-def]
    best = 0.0
    for _ in range(repeat):
        t = time.perf_counter()
        n = fn()
        best = max(best, n / (time.perf_counter() - t))
    return best


def raw(ds: dal.Dataset) -> int:
    return sum(b.num_rows for b in ds.select(*COLUMNS).iter_batches(BATCH))


def torch_loader(ds: dal.Dataset, workers: int = 2) -> int:
    import torch
    from torch.utils.data import DataLoader

    n = 0
    for batch in DataLoader(ds.select(*COLUMNS).to_torch(BATCH), batch_size=None, num_workers=workers):
        x = torch.stack([batch[c] for c in COLUMNS[:-1]], dim=1)  # what a training step would do
        n += x.shape[0]
    return n


def tf_data(ds: dal.Dataset) -> int:
    return sum(int(b["label"].shape[0]) for b in ds.select(*COLUMNS).to_tf(BATCH))


def petastorm_torch(url: str) -> float:
    from tests.petastorm.legacy import legacy_python

    python = str(legacy_python())
    if subprocess.run([python, "-c", "import torch"], capture_output=True).returncode:
        # benchmark only; keep petastorm's setuptools<70 (torch would pull a newer one)
        subprocess.run([python, "-m", "pip", "install", "-q", "torch==2.13.0", "setuptools<70"], check=True)
    code = f"""
import time, json
from petastorm import make_batch_reader
from petastorm.pytorch import DataLoader
best = 0.0
for _ in range(2):
    t = time.perf_counter(); n = 0
    with DataLoader(make_batch_reader({url!r}, schema_fields={COLUMNS!r}, num_epochs=1, workers_count=2), batch_size={BATCH}) as loader:
        for batch in loader:
            n += len(batch["label"])
    best = max(best, n / (time.perf_counter() - t))
print(json.dumps(best))
"""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, timeout=1800)
    if out.returncode:
        raise RuntimeError(out.stderr[-1500:])
    return float(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dal-adapters-bench-"))
    os.environ["DAL_HOME"] = str(work / "home")
    ds = reader_bench.build(200_000 if args.quick else 2_000_000)
    base = rows_per_s(lambda: raw(ds))
    rows = [("dal scan, 5 columns, batches of 1024 (baseline)", base)]
    rows.append(
        ("to_torch + DataLoader(num_workers=0), tensors stacked per step", rows_per_s(lambda: torch_loader(ds, 0)))
    )
    rows.append(
        ("to_torch + DataLoader(num_workers=2), tensors stacked per step", rows_per_s(lambda: torch_loader(ds, 2)))
    )
    rows.append(("to_tf (tf.data, prefetch AUTOTUNE)", rows_per_s(lambda: tf_data(ds))))
    try:
        rows.append(
            (
                "petastorm 0.13.1 petastorm.pytorch.DataLoader(make_batch_reader, 2 workers)",
                petastorm_torch(ds.petastorm_url),
            )
        )
    except Exception as e:
        print("petastorm failed:", str(e).splitlines()[-1][:200])
    print(
        f"\n{ds.count():,} rows, {len(ds.scan().plan())} row groups\n\n| path | rows/s | vs dal scan |\n|---|---|---|"
    )
    for name, r in rows:
        print(f"| {name} | {r / 1e6:.2f} M | {r / base:.2f}x |")


if __name__ == "__main__":
    main()
