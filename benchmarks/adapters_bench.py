"""Adapter throughput: rows/s into PyTorch and TensorFlow vs the hand-written loops that are the practical
limit (their code is below), on the reader benchmark's dataset (5 columns, batches of 1024).

    python benchmarks/adapters_bench.py            # 2M rows, ~5 min; --quick: 200k rows; --rows N

Rows (each path's best of ``--rounds`` interleaved rounds, after one warm-up run):
- hand-written pyarrow -> torch: ``pyarrow.dataset(files).to_batches(65536)``, one ``torch.from_numpy`` per
  column per chunk, 1024-row slices, ``torch.stack`` per step;
- ``to_torch`` iterated directly (threads: num_workers=0), ``to_torch(...).loader(num_workers=2)`` (worker
  processes ship whole chunks), a plain ``DataLoader(to_torch(...), batch_size=None)`` with 0 and 2 workers,
  DataLoader's own limit (an int per batch: nothing read or shipped; and torch shipping prepared tensors),
  and shuffled;
- hand-written tf.data: a generator of 65k-row NumPy chunks, ``rebatch(1024)``; ``to_tf``;
- the Python cost of one 1024 x 5 batch (slicing converted chunks, no I/O);
- petastorm 0.13.1's ``petastorm.pytorch.DataLoader`` (legacy venv; torch is lent from this venv);
- tensor-heavy: a Petastorm dataset with an 8x8 float32 ndarray field and a 32x32x3 png image, decoded
  samples/s of ``to_torch`` (threads, and ``loader(num_workers=2)``) vs petastorm 0.13.1's ``make_reader``;
- peak RSS (VmHWM, a fresh subprocess) of ``to_torch`` streaming every column of the dataset, plain and
  shuffled; PSS (this process and its live workers, ``/proc/PID/smaps_rollup``) of ``to_torch`` iterated
  directly and ``loader(num_workers=2)`` streaming the 5 columns, against the PSS before reading.

CPU per row (the rows of the first table; each path's lowest over the rounds): the CPU seconds of the whole
process tree (``proc_cpu.tree_cpu_seconds``: this process, the workers it reaped, the workers still alive)
around each run, divided by the rows; and that figure over the hand-written pyarrow -> torch loop's in the
same run. A plain ``DataLoader(num_workers=2)``'s workers exit (and are reaped) at the end of every epoch:
they are counted through ``RUSAGE_CHILDREN``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import reader_bench  # noqa: E402
from proc_cpu import tree_cpu_seconds  # noqa: E402
from torch.utils.data import IterableDataset  # noqa: E402

import dal  # noqa: E402

COLUMNS = ["f0", "f1", "f2", "f3", "label"]
BATCH = 1024
CHUNK = 65_536


def rows_per_s(fn: Callable[[], int], repeat: int = 2) -> float:
    best = 0.0
    for _ in range(repeat):
        t = time.perf_counter()
        n = fn()
        best = max(best, n / (time.perf_counter() - t))
    return best


def paths(ds: dal.Dataset) -> list[str]:
    from dal.storage import uris

    return [uris.filesystem(f.uri, {})[1] for f in ds.files()]


def hand_torch(files: list[str]) -> int:
    """The hand-written loop: what twenty lines of pyarrow and torch do."""
    import pyarrow.dataset as pads
    import torch

    n = 0
    for chunk in pads.dataset(files, format="parquet").to_batches(columns=COLUMNS, batch_size=CHUNK):
        cols = [torch.from_numpy(chunk.column(c).to_numpy()) for c in COLUMNS]
        for i in range(0, chunk.num_rows, BATCH):
            x = torch.stack([c[i : i + BATCH] for c in cols[:-1]], dim=1)
            n += x.shape[0]
    return n


def steps(batches: Any) -> int:
    import torch

    n = 0
    for batch in batches:
        x = torch.stack([batch[c] for c in COLUMNS[:-1]], dim=1)  # what a training step would do
        n += x.shape[0]
    return n


LOADERS: dict[int, Any] = {}


def dal_torch(ds: dal.Dataset, workers: int = 0, *, shuffle: bool = False, plain_loader: bool = False) -> int:
    scan = ds.select(*COLUMNS)
    data = (scan.shuffle(seed=1) if shuffle else scan).to_torch(BATCH)
    if plain_loader:
        from torch.utils.data import DataLoader

        return steps(DataLoader(data, batch_size=None, num_workers=workers))
    if workers:  # one loader for every run, as across a training's epochs: its workers persist
        loader = LOADERS.setdefault(workers, data.loader(num_workers=workers))
        return steps(loader)
    return steps(data)


def dataloader_ceiling(rows: int, workers: int, tensors: bool = False) -> int:
    """DataLoader's own cost per batch, nothing read: an IterableDataset handing out ``rows / 1024`` items
    (split across the workers) through ``DataLoader(batch_size=None)``, each counted as 1024 rows. An int
    per item: no dataset fed through a plain DataLoader goes faster on the same machine. ``tensors``: one
    prepared 1024 x 5 batch of tensors per item, as torch ships tensors out of workers (a shared-memory
    segment and a file-descriptor hand-over per tensor): why dal's workers ship a batch as one buffer."""
    from torch.utils.data import DataLoader

    return sum(BATCH for _ in DataLoader(Prepared(rows, tensors), batch_size=None, num_workers=workers))


class Prepared(IterableDataset):  # type: ignore[misc]
    """See ``dataloader_ceiling`` (a class at module level: spawn workers unpickle it)."""

    def __init__(self, rows: int, tensors: bool) -> None:
        super().__init__()
        self.rows, self.tensors = rows, tensors

    def __iter__(self) -> Iterator[Any]:
        import torch
        from torch.utils.data import get_worker_info

        info = get_worker_info()
        workers = info.num_workers if info is not None else 1
        item: Any = 0
        if self.tensors:
            item = {c: torch.zeros(BATCH, dtype=torch.int32 if c == "label" else torch.float32) for c in COLUMNS}
        for _ in range(self.rows // BATCH // workers):
            yield item


def hand_tf(files: list[str]) -> int:
    """The hand-written tf.data loop: a generator of 65k-row NumPy chunks, rebatched."""
    import pyarrow.dataset as pads
    import tensorflow as tf

    def chunks() -> Iterator[dict[str, Any]]:
        for chunk in pads.dataset(files, format="parquet").to_batches(columns=COLUMNS, batch_size=CHUNK):
            yield {c: chunk.column(c).to_numpy() for c in COLUMNS}

    spec = {c: tf.TensorSpec((None,), tf.int32 if c == "label" else tf.float32) for c in COLUMNS}
    data = tf.data.Dataset.from_generator(chunks, output_signature=spec).rebatch(BATCH).prefetch(tf.data.AUTOTUNE)
    return sum(int(b["label"].shape[0]) for b in data)


def dal_tf(ds: dal.Dataset) -> int:
    return sum(int(b["label"].shape[0]) for b in ds.select(*COLUMNS).to_tf(BATCH))


def python_per_batch(ds: dal.Dataset) -> float:
    """Microseconds of Python per 1024 x 5 batch: slicing already converted chunks (no I/O, no decoding)."""
    from dal.adapters import torch as adapter
    from dal.read import feed

    data = ds.select(*COLUMNS).to_torch(BATCH)
    chunks = list(ds.select(*COLUMNS).iter_chunks(convert=data.convert))
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        k = 0
        for _n, cols in feed.split_batches(iter(chunks), BATCH, adapter._take, adapter._join, adapter._split):
            adapter._batch(cols)
            k += 1
        best = min(best, (time.perf_counter() - t) / k)
    return best * 1e6


def legacy_with_torch() -> str:
    """The legacy venv's python, with this venv's torch lent through a .pth of symlinks: pip cannot install
    torch 2.13 there beside petastorm's setuptools<70 (resolver conflict), and the same Python runs both."""
    import importlib.util

    from tests.petastorm.legacy import legacy_python

    python = legacy_python()
    if subprocess.run([str(python), "-c", "import torch"], capture_output=True).returncode:
        lent = python.parent.parent / "lent-torch"
        lent.mkdir(exist_ok=True)
        for mod in ("torch", "torchgen", "functorch", "sympy", "mpmath", "networkx", "filelock", "typing_extensions",
                    "jinja2", "markupsafe", "fsspec"):  # fmt: skip
            spec = importlib.util.find_spec(mod)
            if spec is None or spec.origin is None:
                continue
            src = Path(spec.origin)
            src = src.parent if src.name == "__init__.py" else src
            if not (lent / src.name).exists():
                (lent / src.name).symlink_to(src)
        site = subprocess.run(
            [str(python), "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True, text=True
        ).stdout.strip()
        Path(site, "zz-lent-torch.pth").write_text(str(lent) + "\n")  # after the venv's own packages
    return str(python)


def petastorm_torch(url: str) -> float:
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
    return float(json.loads(run_legacy(code)))


TENSOR_ROWS = 50_000


def existing(name: str) -> dal.Dataset | None:
    """A dataset an earlier run built in the same ``--work`` dir, else None."""
    try:
        return dal.open(name)
    except dal.DalError:
        return None


def tensor_dataset(rows: int) -> dal.Dataset:
    """The tensor-heavy dataset: an id, an 8x8 float32 ndarray and a 32x32x3 png image per row (Petastorm)."""
    import numpy as np

    from dal import ImageCodec, NdarrayCodec, ScalarCodec, TensorField, TensorSchema

    schema = TensorSchema(
        "Tensors",
        [
            TensorField("id", np.int64, (), ScalarCodec()),
            TensorField("arr", np.float32, (8, 8), NdarrayCodec()),
            TensorField("image", np.uint8, (32, 32, 3), ImageCodec("png")),
        ],
    )
    rng = np.random.default_rng(2)
    step = 10_000
    for k in range(0, rows, step):
        n = min(step, rows - k)
        # smooth images (a gradient plus noise), so png compresses them as it would photos, roughly
        base = np.add.outer(np.arange(32), np.arange(32)).astype(np.uint8)[None, :, :, None] * 4
        images = (base + rng.integers(0, 32, (n, 32, 32, 3))).astype(np.uint8)
        columns = {
            "id": np.arange(k, k + n),
            "arr": list(rng.standard_normal((n, 8, 8)).astype(np.float32)),
            "image": list(images),
        }
        dal.write(columns, "bench.tensors", format="petastorm", schema=schema if k == 0 else None)
    return dal.open("bench.tensors")


def dal_tensors(ds: dal.Dataset, workers: int = 0) -> int:
    data = ds.scan().to_torch(256)
    n = 0
    for batch in LOADERS.setdefault(-workers, data.loader(num_workers=workers)) if workers else data:
        assert batch["image"].shape[1:] == (32, 32, 3) and batch["arr"].shape[1:] == (8, 8)
        n += batch["image"].shape[0]
    return n


def petastorm_tensors(url: str, rounds: int) -> float:
    """Decoded samples/s of petastorm 0.13.1's make_reader (2 worker threads, its default pool)."""
    code = f"""
import time, json
from petastorm import make_reader
best = 0.0
for _ in range({rounds}):
    t = time.perf_counter(); n = 0
    with make_reader({url!r}, num_epochs=1, workers_count=2) as reader:
        for row in reader:
            assert row.image.shape == (32, 32, 3)
            n += 1
    best = max(best, n / (time.perf_counter() - t))
print(json.dumps(best))
"""
    return float(json.loads(run_legacy(code)))


def run_legacy(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    out = subprocess.run([legacy_with_torch(), "-c", code], capture_output=True, text=True, env=env, timeout=1800)
    if out.returncode:
        raise RuntimeError(out.stderr[-1500:])
    return out.stdout.strip().splitlines()[-1]


RSS_SCRIPT = """
import json, sys, time
import dal
shuffle = sys.argv[2] == "shuffled"
scan = dal.open(sys.argv[1]).scan()
data = (scan.shuffle(seed=1) if shuffle else scan).to_torch(1024)
base = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS:"))
t = time.perf_counter(); n = 0
for batch in data:
    n += len(batch["id"])
# VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so a child would report its parent's peak
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps({"rows": n, "rows_per_s": n / (time.perf_counter() - t), "base_mb": base / 1024, "peak_mb": hwm / 1024}))
"""


PSS_SCRIPT = """
import json, os, sys
from pathlib import Path
import dal
def tree_pss_mb():
    # Pss (shared pages split between the processes mapping them) of this process and its live descendants
    parent = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            pass
    tree, todo = [], [os.getpid()]
    while todo:
        pid = todo.pop(); tree.append(pid); todo += [p for p, pp in parent.items() if pp == pid]
    total = 0
    for pid in tree:
        try:
            total += next(int(l.split()[1]) for l in open(f"/proc/{pid}/smaps_rollup") if l.startswith("Pss:"))
        except (OSError, StopIteration):
            pass
    return total / 1024
data = dal.open(sys.argv[1]).select(*sys.argv[3].split(",")).to_torch(1024)
base = tree_pss_mb()
batches = iter(data if sys.argv[2] == "direct" else data.loader(num_workers=2))
n, most = 0, 0.0
for i, batch in enumerate(batches):
    n += len(batch["label"])
    if i % 200 == 100:
        most = max(most, tree_pss_mb())
print(json.dumps({"rows": n, "base_mb": base, "pss_mb": most}))
"""


def pss(name: str, mode: str) -> dict[str, float]:
    """The PSS of a fresh process (and its DataLoader workers, alive: ``loader()``'s persist) while it streams
    ``name``'s 5 columns through ``to_torch(1024)`` iterated directly or ``.loader(num_workers=2)``, sampled
    every 200 batches (the highest), and before reading."""
    out = subprocess.run(
        [sys.executable, "-c", PSS_SCRIPT, name, mode, ",".join(COLUMNS)], capture_output=True, text=True,
        env=os.environ.copy(), cwd=REPO, timeout=1800,
    )  # fmt: skip
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def peak_rss(name: str, mode: str) -> dict[str, float]:
    """Peak RSS of a fresh process streaming every column of ``name`` through ``to_torch`` (all batches)."""
    out = subprocess.run(
        [sys.executable, "-c", RSS_SCRIPT, name, mode], capture_output=True, text=True, env=os.environ.copy(),
        cwd=REPO, timeout=1800,
    )  # fmt: skip
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="200k rows")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--no-petastorm", action="store_true")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; each path's best is kept")
    parser.add_argument("--work", type=Path, default=None, help="scratch dir (reused: datasets built once)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="dal-adapters-bench-"))
    os.environ["DAL_HOME"] = str(work / "home")
    ds = existing("bench.reader") or reader_bench.build(args.rows or (200_000 if args.quick else 2_000_000))
    tensors = existing("bench.tensors") or tensor_dataset(TENSOR_ROWS // 5 if args.quick else TENSOR_ROWS)
    files = paths(ds)
    load = os.getloadavg()
    paths_: dict[str, Callable[[], int]] = {
        "hand torch": lambda: hand_torch(files),
        "direct": lambda: dal_torch(ds),
        "loader2": lambda: dal_torch(ds, 2),
        "plain2": lambda: dal_torch(ds, 2, plain_loader=True),
        "plain0": lambda: dal_torch(ds, 0, plain_loader=True),
        "ceiling0": lambda: dataloader_ceiling(ds.count(), 0),
        "ceiling2": lambda: dataloader_ceiling(ds.count(), 2),
        "tensors2": lambda: dataloader_ceiling(ds.count() // 4, 2, tensors=True),
        "shuffled": lambda: dal_torch(ds, shuffle=True),
        "hand tf": lambda: hand_tf(files),
        "tf": lambda: dal_tf(ds),
    }
    for fn in paths_.values():
        fn()  # warm: page cache, footers, imports
    best = dict.fromkeys(paths_, 0.0)
    cpu = dict.fromkeys(paths_, float("inf"))  # CPU seconds per million rows, all processes
    for _ in range(args.rounds):  # interleaved rounds: a burst of load elsewhere hits every path alike
        for key, fn in paths_.items():
            c, t = tree_cpu_seconds(), time.perf_counter()
            n = fn()
            best[key] = max(best[key], n / (time.perf_counter() - t))
            cpu[key] = min(cpu[key], (tree_cpu_seconds() - c) / n * 1e6)
    hand, hand_t = best["hand torch"], best["hand tf"]
    rows: list[tuple[str, float, float, str, float]] = [
        ("hand-written pyarrow -> torch loop (the limit)", hand, hand, "1.0", cpu["hand torch"]),
        ("to_torch, iterated directly (num_workers=0)", best["direct"], hand, ">= 0.9", cpu["direct"]),
        ("to_torch(...).loader(num_workers=2)", best["loader2"], hand, ">= 0.7", cpu["loader2"]),
        ("DataLoader(to_torch(...), batch_size=None, num_workers=0)", best["plain0"], hand, ">= 0.9", cpu["plain0"]),
        ("DataLoader(to_torch(...), batch_size=None, num_workers=2)", best["plain2"], hand, ">= 0.5", cpu["plain2"]),
        ("DataLoader's own limit, num_workers=0 (an int per batch)", best["ceiling0"], hand, "", cpu["ceiling0"]),
        ("DataLoader's own limit, num_workers=2 (an int per batch)", best["ceiling2"], hand, "", cpu["ceiling2"]),
        ("torch shipping a prepared 1024 x 5 tensor batch, 2 workers", best["tensors2"], hand, "", cpu["tensors2"]),
        ("to_torch shuffled (seed), num_workers=0", best["shuffled"], hand, ">= 0.7", cpu["shuffled"]),
        ("hand-written tf.data loop (the limit)", hand_t, hand_t, "1.0", cpu["hand tf"]),
        ("to_tf", best["tf"], hand_t, ">= 0.8", cpu["tf"]),
    ]
    if not args.no_petastorm:
        try:
            pet = petastorm_torch(ds.petastorm_url)
            rows.append(("petastorm 0.13.1 pytorch.DataLoader(make_batch_reader, 2 workers)", pet, hand, "", 0.0))
        except Exception as e:  # reported, not dropped: the row must run on a fresh machine
            print("petastorm failed:", str(e).splitlines()[-1][:300] if str(e) else repr(e))
            rows.append(("petastorm 0.13.1 pytorch.DataLoader(make_batch_reader, 2 workers): FAILED", 0.0, hand, "", 0))
    us = python_per_batch(ds)

    heavy: dict[str, Callable[[], int]] = {
        "direct": lambda: dal_tensors(tensors),
        "loader2": lambda: dal_tensors(tensors, 2),
    }
    for fn in heavy.values():
        fn()
    heavy_best = dict.fromkeys(heavy, 0.0)
    for _ in range(max(2, args.rounds // 2)):
        for key, fn in heavy.items():
            heavy_best[key] = max(heavy_best[key], rows_per_s(fn, repeat=1))
    pet_heavy = None
    if not args.no_petastorm:
        try:
            pet_heavy = petastorm_tensors(tensors.petastorm_url, 2)
        except Exception as e:
            print("petastorm make_reader failed:", str(e).splitlines()[-1][:300] if str(e) else repr(e))
    rss = {mode: peak_rss("bench.reader", mode) for mode in ("plain", "shuffled")}
    pss_mb = {mode: pss("bench.reader", mode) for mode in ("direct", "loader2")}

    print(f"\n{ds.count():,} rows, {len(ds.scan().plan())} row groups, batches of {BATCH}, columns {COLUMNS}\n")
    print(f"load average before / after: {load[0]:.2f} / {os.getloadavg()[0]:.2f}\n")
    hand_cpu = cpu["hand torch"]
    print(
        "| path | rows/s | vs its hand-written loop | target | CPU s per 1M rows (all processes) | CPU per row vs hand torch loop |"
    )
    print("|---|---|---|---|---|---|")
    for name, r, ref, target, c in rows:
        vs = f"{c / hand_cpu:.2f}x" if c and hand_cpu else "-"
        print(f"| {name} | {r / 1e6:.2f} M | {r / ref:.2f}x | {target} | {f'{c:.3f}' if c else '-'} | {vs} |")
    print(f"| Python per 1024 x 5 batch (slicing converted chunks) | {us:.1f} µs | | < 40 µs | | |")
    print(f"\nTensor-heavy: {tensors.count():,} rows (id, 8x8 float32 ndarray, 32x32x3 png), batches of 256\n")
    print("| path | decoded samples/s | vs petastorm make_reader |\n|---|---|---|")
    for key, name in (("direct", "to_torch, iterated directly"), ("loader2", "to_torch(...).loader(num_workers=2)")):
        vs = f"{heavy_best[key] / pet_heavy:.1f}x" if pet_heavy else "petastorm failed"
        print(f"| {name} | {heavy_best[key] / 1e3:.1f} k | {vs} |")
    if pet_heavy:
        print(f"| petastorm 0.13.1 make_reader (2 worker threads, rows decoded) | {pet_heavy / 1e3:.1f} k | 1.0x |")
    print("\nPeak RSS of to_torch(1024) streaming every column (a fresh process):\n")
    print("| path | peak RSS (VmHWM) | RSS before reading | rows/s |\n|---|---|---|---|")
    for mode, r in rss.items():
        print(f"| {mode} | {r['peak_mb']:.0f} MB | {r['base_mb']:.0f} MB | {r['rows_per_s'] / 1e6:.2f} M |")
    print("\nPSS of a fresh process and its workers streaming the 5 columns through to_torch(1024):\n")
    print("| path | PSS while streaming (highest sample) | PSS before reading | added |\n|---|---|---|---|")
    for mode, r in pss_mb.items():
        print(f"| {mode} | {r['pss_mb']:.0f} MB | {r['base_mb']:.0f} MB | +{r['pss_mb'] - r['base_mb']:.0f} MB |")


if __name__ == "__main__":
    main()
