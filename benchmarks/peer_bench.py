"""Peer benchmark: dal's torch feed vs the hand-written loops and the systems a user would pick instead, on the
same rows, each system in its own process (issue 26).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/peer_bench.py --rows 500000 --rounds 3
    ... --systems hand,dal,lance --datasets tab        # a subset; --work DIR keeps (and reuses) the prepared data

The peers live in their own benchmark-only venv, never in dal's dependencies. Create it once (torch pinned in
every pip command: this machine has a local CPU build of 2.13.0, an unpinned torch downloads GBs):

    python3.11 -m venv /work/peer-venv
    /work/peer-venv/bin/pip install torch==2.13.0
    /work/peer-venv/bin/pip install torch==2.13.0 pylance datasets litdata 'ray[data]' aiohttp \\
        pyarrow pillow opencv-python-headless

(aiohttp: Ray's ``read_parquet`` of several files imports fsspec's HTTP filesystem, which needs it.)
Mosaic gets a venv of its own: mosaicml-streaming 0.13 pulls transformers<5, hence huggingface-hub<1 (which
breaks datasets 5) and numpy 2.1; and the torchvision it pulls from PyPI is a CUDA build that does not load beside
the CPU torch (``libc10_cuda.so``), so it is removed and the Mosaic processes stub it (``_torchvision_stub``):

    python3.11 -m venv /work/peer-venv-mosaic
    /work/peer-venv-mosaic/bin/pip install torch==2.13.0
    /work/peer-venv-mosaic/bin/pip install torch==2.13.0 mosaicml-streaming pyarrow opencv-python-headless
    /work/peer-venv-mosaic/bin/pip uninstall -y torchvision

``--peer-python`` names the peers' python (default /work/peer-venv/bin/python; Mosaic: /work/peer-venv-mosaic's
where it exists); ``--python NAME=PATH`` gives one peer another. dal and the hand-written loops run with this
interpreter (dal's venv) and ``PYTHONPATH`` at this checkout. Versions measured: pylance 14.0.2, datasets 5.2.0,
mosaicml-streaming 0.13.0, litdata 0.2.76, ray 2.60.0, torch 2.13.0 (CPU), pyarrow 26.0.1.

Datasets (the same rows for every system, generated once as Parquet under ``--work``/src):
- tab: ``--rows`` rows of 4 float32 + int32 label, batches of 1024: a step stacks a (1024, 4) float32 tensor;
- img: ``--image-rows`` 32x32x3 PNG images + label, batches of 256: a step gets (256, 32, 32, 3) uint8;
- ten: ``--image-rows`` raw tensors of 3,072 uint8 (32x32x3) per sample, batches of 256: (256, 3072) uint8.

Systems (each prepares its own format first, timed: "prep s"):
- hand: the hand-written pyarrow -> torch loops over the source Parquet (their code is below; the limit);
- dal: ``dal.write`` into a temporary catalog (tab and ten: Delta, ten as ``FixedSizeList<uint8>[3072]``; img: a
  Petastorm dataset with an ``ImageCodec("png")`` field), read by ``dal.open(name).to_torch(batch_size)``;
- lance: ``lance.write_dataset``; read by ``to_batches(batch_size)`` (+ ``torch.from_numpy``) and, as lance-torch,
  by ``lance.torch.data.LanceDataset(batch_size=...)``;
- hf: ``Dataset.from_parquet(...)`` (img: ``cast_column("image", Image())``) saved with ``save_to_disk``; read by
  ``load_from_disk(...).with_format("torch").iter(batch_size)``;
- mosaic: ``MDSWriter`` (no compression); read by ``StreamingDataset(local=...)`` in a torch ``DataLoader``;
- litdata: ``optimize`` (1 worker; it switches the process to spawn: a process of its own); read by
  ``StreamingDataset`` + ``StreamingDataLoader``;
- ray: reads the source Parquet: ``ray.data.read_parquet(...).iter_torch_batches`` (img: ``map_batches`` decodes),
  after ``ray.init(num_cpus=2)``.
Where a system has no image decoder of its own (hand, lance, mosaic, litdata) the loop decodes the PNG bytes with
OpenCV (PIL where cv2 is missing), as dal's ``ImageCodec`` does. Every reader runs with ``num_workers=0`` / in
process (Ray: its own worker processes), no shuffling.

Each (system, dataset) runs in a fresh subprocess per round, rounds interleaved (a burst of load elsewhere hits
every system alike); each figure is the best of the rounds (CPU and memory: the least). Measured:
- rows/s: rows / time from creating the batch iterator to the last batch (after imports and open); a read
  still going after ``--max-seconds`` (default 30) stops at its next batch, its rate over the rows it read
  ("capped" in the table: the slow peers on the tabular rows);
- first batch: from after the imports (dal's lazy ones of open, to_torch and its Delta reader done before, as
  every peer imports its own; open included; Ray: ``ray.init`` included) to the first batch. Every system
  opens its data before the rows/s clock starts: dal ``dal.open`` and ``files()`` (the version's file list,
  as ``lance.dataset`` loads its manifest), planning (footers) inside it;
- CPU s / 1M rows: user + system CPU of the whole process tree during the iteration (``proc_cpu``: the
  process's threads, the children it reaped, its live descendants and what they reaped); "process CPU s": ``getrusage(RUSAGE_CHILDREN)`` around the whole
  subprocess (imports, open, iteration, exit);
- peak extra MB: VmHWM minus VmRSS after the imports, plus the VmHWM of the descendants alive at the end (Ray's
  raylet and workers; its shared-memory object store is not counted);
- random access: ``take`` of ``--take-batches`` batches of 1024 random positions (the same for all): dal
  ``scan.rows().take``, Lance ``take``, HF ``ds[indices]`` (numpy format).
A system that fails prints FAILED with the reason in its row.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from proc_cpu import tree_cpu_seconds  # beside this script, stdlib only: imports in every peer's venv

REPO = Path(__file__).resolve().parents[1]
SYSTEMS = ["hand", "dal", "lance", "lance-torch", "hf", "mosaic", "litdata", "ray"]
DATASETS = ["tab", "img", "ten"]
BATCH = {"tab": 1024, "img": 256, "ten": 256}
FEATURES = ["f0", "f1", "f2", "f3"]
TAKE = 1024
# which system's prepared format a reader uses (lance-torch reads lance's files)
PREPARED = {"lance-torch": "lance"}
# peers whose pins conflict with the others' get a venv of their own where it exists (see the docstring)
OWN_VENV = {"mosaic": "/work/peer-venv-mosaic/bin/python"}
PEERS = {"lance", "lance-torch", "hf", "mosaic", "litdata", "ray"}


# ---------------------------------------------------------------- measuring (stdlib only: runs in every venv)


def _parents() -> dict[int, int]:
    """pid -> parent pid, of every process."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            out[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
    return out


def _tree(root: int, parents: dict[int, int]) -> list[int]:
    kids: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        kids.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += kids.get(pid, [])
    return found


def _status_kb(pid: int | str, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Enough(Exception):
    """A run past ``--max-seconds`` of iteration stops at its next batch (its rate is over the rows it read)."""


class Meter:
    """Marks of one run: imported (RSS base), start (iterator created), each batch."""

    max_seconds = float("inf")

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.base_kb = 0
        self.rows = 0
        self.first: float | None = None
        self.start_t = self.t0
        self.cpu0 = 0.0

    def imported(self) -> None:
        self.t0 = time.perf_counter()
        self.base_kb = _status_kb("self", "VmRSS")

    def start(self) -> None:
        self.cpu0 = tree_cpu_seconds()
        self.start_t = time.perf_counter()

    def batch(self, n: int) -> None:
        now = time.perf_counter()
        if self.first is None:
            self.first = now - self.t0
        self.rows += n
        if now - self.start_t > self.max_seconds:
            self.capped = True
            raise Enough

    def result(self) -> dict[str, Any]:
        end = time.perf_counter()
        cpu = tree_cpu_seconds() - self.cpu0
        kids = [p for p in _tree(os.getpid(), _parents()) if p != os.getpid()]
        peak = _status_kb("self", "VmHWM") - self.base_kb + sum(_status_kb(p, "VmHWM") for p in kids)
        return {
            "capped": getattr(self, "capped", False),
            "rows": self.rows,
            "rows_per_s": self.rows / (end - self.start_t),
            "first_s": self.first,
            "cpu_per_m": cpu / max(self.rows, 1) * 1e6,
            "peak_mb": peak / 1024,
        }


# ---------------------------------------------------------------- shared helpers of the readers


def src_files(work: Path, ds: str) -> list[str]:
    return sorted(str(p) for p in (work / "src" / ds).glob("*.parquet"))


def decoder() -> Callable[[Any], Any]:
    """PNG bytes -> (32, 32, 3) uint8 RGB: OpenCV as dal's ImageCodec, PIL where cv2 is missing."""
    import numpy as np

    try:
        import cv2

        cv2.setNumThreads(1)
        return lambda b: cv2.imdecode(np.frombuffer(b, np.uint8), cv2.IMREAD_UNCHANGED)[:, :, ::-1]
    except ImportError:
        import io

        from PIL import Image

        return lambda b: np.asarray(Image.open(io.BytesIO(b)).convert("RGB"))


def decode_all(blobs: Any) -> Any:
    import numpy as np
    import torch

    dec = DECODE.setdefault(0, decoder())
    return torch.from_numpy(np.stack([dec(b) for b in blobs]))


DECODE: dict[int, Callable[[Any], Any]] = {}


def check(ds: str, step: Any) -> int:
    """What a training step gets; the shape is checked on every batch (cheap) and its rows returned."""
    x, y = step
    want = {"tab": (4,), "img": (32, 32, 3), "ten": (3072,)}[ds]
    assert tuple(x.shape[1:]) == want and x.shape[0] == y.shape[0], (tuple(x.shape), tuple(y.shape))
    assert str(x.dtype) == ("torch.float32" if ds == "tab" else "torch.uint8"), x.dtype
    return int(x.shape[0])


def from_columns(ds: str, cols: dict[str, Any]) -> tuple[Any, Any]:
    """A batch of torch tensors / lists by column -> (x, y) as a step wants them."""
    import torch

    def t(v: Any) -> Any:
        return v if isinstance(v, torch.Tensor) else torch.as_tensor(v)

    y = t(cols["label"])
    if ds == "tab":  # LitData keeps Python floats as float64: cast, as its user would
        return torch.stack([t(cols[c]) for c in FEATURES], dim=1).to(torch.float32), y
    if ds == "img":
        v = cols["image"]
        if isinstance(v, torch.Tensor):
            return v, y
        if len(v) and isinstance(v[0], torch.Tensor):
            return torch.stack(list(v)), y
        return decode_all(v), y
    v = cols["x"]
    if isinstance(v, torch.Tensor):
        return v.reshape(len(v), -1), y
    return torch.stack([t(a).reshape(-1) for a in v]), y


def arrow_step(ds: str, batch: Any) -> tuple[Any, Any]:
    """An Arrow record batch -> (x, y) by hand: from_numpy per column, PNGs decoded, tensors reshaped."""
    import numpy as np
    import torch

    y = torch.from_numpy(batch.column("label").to_numpy())
    if ds == "tab":
        return torch.stack([torch.from_numpy(batch.column(c).to_numpy()) for c in FEATURES], dim=1), y
    if ds == "img":
        return decode_all(batch.column("image").to_pylist()), y
    col = batch.column("x")
    flat = col.flatten().to_numpy() if hasattr(col, "flatten") else np.asarray(col.values)
    return torch.from_numpy(flat.reshape(len(col), -1)), y


# ---------------------------------------------------------------- readers: one (system, dataset) per process


def read_hand(work: Path, ds: str, m: Meter) -> None:
    """The hand-written loop: 65,536-row chunks from pyarrow, one conversion per chunk, batch slices."""
    import pyarrow.dataset as pads
    import torch

    m.imported()
    data = pads.dataset(src_files(work, ds), format="parquet")
    b = BATCH[ds]
    m.start()
    for chunk in data.to_batches(batch_size=65_536):
        if ds == "tab":  # columns converted once per chunk, stacked per step (as adapters_bench's loop): one
            # torch.stack of 65,536 rows goes parallel (OpenMP), whose spinning threads cost more than it saves
            y = torch.from_numpy(chunk.column("label").to_numpy())
            cols = [torch.from_numpy(chunk.column(c).to_numpy()) for c in FEATURES]
            for i in range(0, len(y), b):
                m.batch(check(ds, (torch.stack([c[i : i + b] for c in cols], dim=1), y[i : i + b])))
            continue
        x, y = arrow_step(ds, chunk)
        for i in range(0, len(y), b):
            m.batch(check(ds, (x[i : i + b], y[i : i + b])))


def read_dal(work: Path, ds: str, m: Meter) -> None:
    # dal imports lazily: what open, to_torch and the format's reader need is imported before the clock, as
    # every peer's import is (deltalake: dal reads a Delta version's log with delta-rs)
    import dal
    import dal.adapters.torch
    import dal.api

    if ds != "img":
        import deltalake  # noqa: F401

    m.imported()
    opened = dal.open(f"peer.{ds}")
    opened.files()  # the version's file list (the Delta log, Petastorm's listing), as lance.dataset() its manifest
    data = opened.scan().to_torch(BATCH[ds])
    m.start()
    for batch in data:
        m.batch(check(ds, from_columns(ds, batch)))


def read_lance(work: Path, ds: str, m: Meter) -> None:
    import lance

    m.imported()
    data = lance.dataset(str(work / "lance" / ds))
    m.start()
    for batch in data.to_batches(batch_size=BATCH[ds]):
        m.batch(check(ds, arrow_step(ds, batch)))


def read_lance_torch(work: Path, ds: str, m: Meter) -> None:
    from lance.torch.data import LanceDataset

    m.imported()
    columns = [*FEATURES, "label"] if ds == "tab" else ["image" if ds == "img" else "x", "label"]
    kw = {"to_tensor_fn": _lance_images} if ds == "img" else {}  # its default converts numeric columns only
    data = LanceDataset(str(work / "lance" / ds), batch_size=BATCH[ds], columns=columns, **kw)
    m.start()
    for batch in data:
        m.batch(check(ds, from_columns(ds, batch)))


def _lance_images(batch: Any, **_: Any) -> dict[str, Any]:
    import torch

    return {"image": decode_all(batch["image"].to_pylist()), "label": torch.from_numpy(batch["label"].to_numpy())}


def read_hf(work: Path, ds: str, m: Meter) -> None:
    import datasets
    import torch

    datasets.disable_progress_bars()
    m.imported()
    data = datasets.load_from_disk(str(work / "hf" / ds)).with_format("torch")
    m.start()
    for batch in data.iter(batch_size=BATCH[ds]):
        x, y = from_columns(ds, batch)
        if ds == "img":  # its torch format gives images channels-first
            x = x.permute(0, 2, 3, 1)
        elif ds == "ten":  # and integers as int64 (8x the bytes): back to what was stored
            x = x.to(torch.uint8)
        m.batch(check(ds, (x, y)))


def _torchvision_stub() -> None:
    """streaming imports torchvision for its vision subpackage only (a dataset base class and to_tensor, which
    MDSWriter and StreamingDataset never use). The torchvision wheels on PyPI are CUDA builds that do not load
    beside a CPU torch (``libc10_cuda.so`` missing): where it does not import, a stub stands in for it."""
    import importlib.machinery
    import types

    try:
        import torchvision  # noqa: F401
    except Exception:
        for name in [n for n in sys.modules if n.split(".")[0] == "torchvision"]:
            del sys.modules[name]
        from torch.utils.data import Dataset

        stub = {n: types.ModuleType(n) for n in ("torchvision", "torchvision.datasets", "torchvision.transforms")}
        stub["torchvision.transforms.functional"] = types.ModuleType("torchvision.transforms.functional")
        for name, mod in stub.items():
            mod.__spec__ = importlib.machinery.ModuleSpec(name, None)
        stub["torchvision.datasets"].VisionDataset = Dataset  # type: ignore[attr-defined]
        stub["torchvision.datasets"].CIFAR10 = Dataset  # type: ignore[attr-defined]
        stub["torchvision.transforms.functional"].to_tensor = None  # type: ignore[attr-defined]
        sys.modules.update(stub)


def read_mosaic(work: Path, ds: str, m: Meter) -> None:
    _torchvision_stub()
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory
    from torch.utils.data import DataLoader

    m.imported()
    clean_stale_shared_memory()
    data = StreamingDataset(local=str(work / "mosaic" / ds), batch_size=BATCH[ds], shuffle=False)
    collate = None if ds != "img" else _collate_bytes
    loader = DataLoader(data, batch_size=BATCH[ds], num_workers=0, collate_fn=collate)
    m.start()
    for batch in loader:
        m.batch(check(ds, from_columns(ds, batch)))


def _collate_bytes(rows: list[dict[str, Any]]) -> dict[str, Any]:
    import torch

    return {"image": [r["image"] for r in rows], "label": torch.tensor([r["label"] for r in rows])}


def read_litdata(work: Path, ds: str, m: Meter) -> None:
    import litdata

    m.imported()
    data = litdata.StreamingDataset(str(work / "litdata" / ds))
    loader = litdata.StreamingDataLoader(
        data, batch_size=BATCH[ds], num_workers=0, collate_fn=_collate_bytes if ds == "img" else None
    )
    m.start()
    for batch in loader:
        m.batch(check(ds, from_columns(ds, batch)))


def _ray_decode(batch: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    dec = DECODE.setdefault(0, decoder())
    return {"image": np.stack([dec(b) for b in batch["image"]]), "label": batch["label"]}


def read_ray(work: Path, ds: str, m: Meter) -> None:
    import ray

    m.imported()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=512 * 2**20)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    data = ray.data.read_parquet(src_files(work, ds))
    if ds == "img":
        data = data.map_batches(_ray_decode, batch_format="numpy")
    m.start()
    for batch in data.iter_torch_batches(batch_size=BATCH[ds]):
        m.batch(check(ds, from_columns(ds, batch)))


READERS: dict[str, Callable[[Path, str, Meter], None]] = {
    "hand": read_hand,
    "dal": read_dal,
    "lance": read_lance,
    "lance-torch": read_lance_torch,
    "hf": read_hf,
    "mosaic": read_mosaic,
    "litdata": read_litdata,
    "ray": read_ray,
}


# ---------------------------------------------------------------- random access


def take_run(work: Path, system: str, batches: int) -> dict[str, Any]:
    import numpy as np

    rows = json.loads((work / "src" / "meta.json").read_text())["rows"]
    idx = np.random.default_rng(1).integers(0, rows, (batches, TAKE))  # the same positions for every system
    m = Meter()
    if system == "dal":
        import dal
        import dal.api  # dal imports lazily: what open needs, before the clock

        m.imported()
        index = dal.open("peer.tab").scan().rows()

        def take(i: Any) -> Any:
            t = index.take(i)
            return {c: t.column(c).to_numpy() for c in t.column_names}
    elif system == "lance":
        import lance

        m.imported()
        lds = lance.dataset(str(work / "lance" / "tab"))

        def take(i: Any) -> Any:
            t = lds.take(i)
            return {c: t.column(c).to_numpy() for c in t.column_names}
    else:
        import datasets

        m.imported()
        hds = datasets.load_from_disk(str(work / "hf" / "tab")).with_format("numpy")

        def take(i: Any) -> Any:
            return hds[i.tolist()]

    m.start()
    for i in idx:
        out = take(i)
        assert len(out["label"]) == TAKE  # (a system's row order is its own: dal's follows its files)
        m.batch(TAKE)
    return m.result()


# ---------------------------------------------------------------- preparation: each system writes its format


def gen_source(work: Path, rows: int, image_rows: int) -> None:
    """The rows every system reads, as Parquet (row groups of 65,536; the label of tab is the row position)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    decode = decoder()
    import cv2

    rng = np.random.default_rng(0)
    step = 250_000
    (work / "src" / "tab").mkdir(parents=True)
    for k in range(0, rows, step):
        n = min(step, rows - k)
        cols = {c: rng.standard_normal(n).astype(np.float32) for c in FEATURES}
        cols["label"] = np.arange(k, k + n, dtype=np.int32)
        pq.write_table(pa.table(cols), work / "src" / "tab" / f"part-{k // step:04d}.parquet", row_group_size=65_536)
    (work / "src" / "meta.json").write_text(json.dumps({"rows": rows, "image_rows": image_rows}))
    base = np.add.outer(np.arange(32), np.arange(32)).astype(np.uint8)[None, :, :, None] * 4
    images = (base + rng.integers(0, 32, (image_rows, 32, 32, 3))).astype(np.uint8)  # smooth: compresses as photos
    labels = rng.integers(0, 10, image_rows).astype(np.int32)
    pngs = [cv2.imencode(".png", np.ascontiguousarray(a[:, :, ::-1]))[1].tobytes() for a in images]
    assert (decode(pngs[0]) == images[0]).all()
    for ds, col in (
        ("img", pa.array(pngs, pa.binary())),
        ("ten", pa.FixedSizeListArray.from_arrays(pa.array(images.reshape(-1)), 3072)),
    ):
        (work / "src" / ds).mkdir(parents=True)
        name = "image" if ds == "img" else "x"
        pq.write_table(
            pa.table({name: col, "label": labels}), work / "src" / ds / "part-0000.parquet", row_group_size=5_000
        )


def prep_dal(work: Path, ds: str) -> None:
    import numpy as np
    import pyarrow.parquet as pq

    import dal
    from dal import ImageCodec, ScalarCodec, TensorField, TensorSchema

    table = pq.read_table(src_files(work, ds))
    if ds != "img":
        dal.write(table, f"peer.{ds}", path=str(work / "dal" / ds))
        return
    decode = decoder()
    schema = TensorSchema(
        "Images",
        [
            TensorField("image", np.uint8, (32, 32, 3), ImageCodec("png")),
            TensorField("label", np.int32, (), ScalarCodec()),
        ],
    )
    images = [decode(b) for b in table.column("image").to_pylist()]
    dal.write(
        {"image": images, "label": table.column("label").to_numpy()},
        f"peer.{ds}",
        format="petastorm",
        schema=schema,
        path=str(work / "dal" / ds),
    )


def prep_lance(work: Path, ds: str) -> None:
    import lance
    import pyarrow.dataset as pads

    lance.write_dataset(pads.dataset(src_files(work, ds)).to_table(), str(work / "lance" / ds))


def prep_hf(work: Path, ds: str) -> None:
    import datasets

    datasets.disable_progress_bars()
    data = datasets.Dataset.from_parquet(src_files(work, ds), cache_dir=str(work / "hf-cache"))
    if ds == "img":
        data = data.cast_column("image", datasets.Image())
    data.save_to_disk(str(work / "hf" / ds))


def _rows(work: Path, ds: str) -> Iterator[dict[str, Any]]:
    import pyarrow.dataset as pads

    for batch in pads.dataset(src_files(work, ds)).to_batches(batch_size=65_536):
        label = batch.column("label").to_numpy()
        if ds == "tab":
            cols = [batch.column(c).to_numpy() for c in FEATURES]
            for i in range(len(label)):
                yield {"f0": cols[0][i], "f1": cols[1][i], "f2": cols[2][i], "f3": cols[3][i], "label": label[i]}
        elif ds == "img":
            for b, y in zip(batch.column("image").to_pylist(), label, strict=True):
                yield {"image": b, "label": y}
        else:
            x = batch.column("x").flatten().to_numpy().reshape(len(label), 3072)
            for i in range(len(label)):
                yield {"x": x[i], "label": label[i]}


def prep_mosaic(work: Path, ds: str) -> None:
    _torchvision_stub()
    from streaming import MDSWriter

    columns = {
        "tab": {**dict.fromkeys(FEATURES, "float32"), "label": "int32"},
        "img": {"image": "bytes", "label": "int32"},
        "ten": {"x": "ndarray:uint8:3072", "label": "int32"},
    }[ds]
    with MDSWriter(out=str(work / "mosaic" / ds), columns=columns, size_limit="64mb") as out:
        for row in _rows(work, ds):
            out.write(row)


def _litdata_rows(item: tuple[str, str]) -> Iterator[dict[str, Any]]:
    """optimize's fn, one call per (work, dataset) input: plain Python scalars, bytes and NumPy arrays."""
    work, ds = item
    for row in _rows(Path(work), ds):
        yield {k: (v if isinstance(v, bytes) or getattr(v, "ndim", 0) else v.item()) for k, v in row.items()}


def prep_litdata(work: Path, ds: str) -> None:
    from litdata import optimize

    optimize(
        fn=_litdata_rows,
        inputs=[(str(work), ds)],
        output_dir=str(work / "litdata" / ds),
        chunk_bytes="64MB",
        num_workers=1,
    )


PREPS: dict[str, Callable[[Path, str], None]] = {
    "dal": prep_dal,
    "lance": prep_lance,
    "hf": prep_hf,
    "mosaic": prep_mosaic,
    "litdata": prep_litdata,
}


# ---------------------------------------------------------------- the orchestrator


def worker(args: argparse.Namespace) -> None:
    work = Path(args.work)
    kind, system, ds = args.worker.split(":")
    if kind == "prep":
        t = time.perf_counter()
        PREPS[system](work, ds)
        out: dict[str, Any] = {"prep_s": time.perf_counter() - t}
    elif kind == "take":
        out = take_run(work, system, args.take_batches)
    else:
        import numpy  # noqa: F401  (every loop's; not counted in its first batch)
        import torch  # noqa: F401

        m = Meter()
        m.max_seconds = args.max_seconds
        try:
            READERS[system](work, ds, m)
        except Enough:
            pass
        out = m.result()
    print("RESULT " + json.dumps(out), flush=True)


def run(python: str, env: dict[str, str], work: Path, job: str, args: argparse.Namespace) -> dict[str, Any]:
    """One job in a fresh process; its whole tree's CPU from getrusage(RUSAGE_CHILDREN) around it."""
    cmd = [python, str(Path(__file__).resolve()), "--work", str(work), "--worker", job]
    cmd += ["--take-batches", str(args.take_batches), "--max-seconds", str(args.max_seconds)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"failed": f"timed out after {args.timeout} s"}
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter() - t
    lines = [line for line in p.stdout.splitlines() if line.startswith("RESULT ")]
    if p.returncode or not lines:
        err = [line for line in (p.stderr or p.stdout).strip().splitlines() if line.strip()]
        reason = next((line for line in reversed(err) if "Error" in line or "error" in line), err[-1] if err else "")
        return {"failed": f"exit {p.returncode}: {reason.strip()[:240]}"}
    out = dict(json.loads(lines[-1][7:]))
    out["process_cpu_s"] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    out["process_s"] = wall
    return out


def fmt_rate(r: float) -> str:
    return f"{r / 1e6:.2f} M" if r >= 1e6 else f"{r / 1e3:.1f} k"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000, help="rows of the tabular dataset")
    parser.add_argument("--image-rows", type=int, default=20_000, help="rows of the image and tensor datasets")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; each figure is the best")
    parser.add_argument("--take-batches", type=int, default=50, help="random-access batches of 1024 per run")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--peer-python", default="/work/peer-venv/bin/python")
    parser.add_argument("--python", action="append", default=[], metavar="NAME=PATH", help="one peer's python")
    parser.add_argument("--work", default=None, help="scratch dir (reused: source and prepared data kept)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per subprocess")
    parser.add_argument(
        "--max-seconds", type=float, default=30.0, help="a read stops after this long (its rate: over the rows read)"
    )
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    work = Path(args.work or tempfile.mkdtemp(prefix="dal-peer-bench-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    systems = [s for s in args.systems.split(",") if s]
    datasets = [d for d in args.datasets.split(",") if d]
    pythons = {s: args.peer_python if s in PEERS else sys.executable for s in SYSTEMS}
    pythons.update({s: p for s, p in OWN_VENV.items() if Path(p).exists()})
    pythons.update(dict(p.split("=", 1) for p in args.python))
    pythons["lance-torch"] = dict(p.split("=", 1) for p in args.python).get("lance-torch", pythons["lance"])
    base_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    base_env.update(RAY_USAGE_STATS_ENABLED="0", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    dal_env = {**base_env, "PYTHONPATH": str(REPO), "DAL_CATALOG_URL": f"sqlite:///{work}/catalog.db",
               "DAL_HOME": str(work / "dal-home")}  # fmt: skip
    peer_env = {**base_env, "HF_HOME": str(work / "hf-home"), "HOME": str(work / "home")}
    envs = {s: dal_env if pythons[s] == sys.executable or s in ("dal", "hand") else peer_env for s in SYSTEMS}
    # the peers' modules were byte-compiled when pip installed them; dal runs from this checkout, where
    # PYTHONDONTWRITEBYTECODE (set on these machines) would make every run compile what dal imports lazily
    # on open and first read (~30 ms counted in its first batch): compile it once, as an install would
    import compileall

    for package in ("dal", "catalog"):
        compileall.compile_dir(str(REPO / package), quiet=1)
    load0 = os.getloadavg()
    started = time.perf_counter()
    if not (work / "src").exists():
        gen_source(work, args.rows, args.image_rows)
    prep: dict[tuple[str, str], dict[str, Any]] = {}
    for s in systems:
        p = PREPARED.get(s, s)
        for d in datasets:
            if p not in PREPS or (p, d) in prep:
                continue
            marker = work / f"prepared-{p}-{d}.json"
            if marker.exists():
                prep[(p, d)] = json.loads(marker.read_text())
                continue
            shutil.rmtree(work / p / d, ignore_errors=True)
            prep[(p, d)] = run(pythons[p], envs[p], work, f"prep:{p}:{d}", args)
            print(f"prepared {p} {d}: {prep[(p, d)]}", flush=True)
            if "failed" not in prep[(p, d)]:
                marker.write_text(json.dumps(prep[(p, d)]))
    jobs = [(s, d) for d in datasets for s in systems]
    takes = [s for s in ("dal", "lance", "hf") if s in systems and "tab" in datasets]
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in range(args.rounds):
        for s, d in jobs + [(s, "take") for s in takes]:
            failed = [x for x in results.get((s, d), []) if "failed" in x]
            if failed:  # a system that failed once is not run again
                continue
            pre = prep.get((PREPARED.get(s, s), "tab" if d == "take" else d), {})
            out = {"failed": "prep " + pre["failed"]} if "failed" in pre else None
            kind = "take" if d == "take" else "read"
            out = out or run(pythons[s], envs[s], work, f"{kind}:{s}:{d}", args)
            results.setdefault((s, d), []).append(out)
            print(f"round {r} {s} {d}: {out}", flush=True)
    load1 = os.getloadavg()
    print(f"\nload average before / after: {load0[0]:.2f} / {load1[0]:.2f}; {time.perf_counter() - started:.0f} s")
    args.work = str(work)
    report(args, systems, datasets, takes, prep, results)


def report(
    args: argparse.Namespace,
    systems: list[str],
    datasets: list[str],
    takes: list[str],
    prep: dict[tuple[str, str], dict[str, Any]],
    results: dict[tuple[str, str], list[dict[str, Any]]],
) -> None:
    def best(runs: list[dict[str, Any]], key: str, high: bool) -> float:
        vals = [x[key] for x in runs if "failed" not in x and x.get(key) is not None]
        return (max if high else min)(vals) if vals else float("nan")

    meta = json.loads((Path(args.work) / "src" / "meta.json").read_text())
    rows = {"tab": meta["rows"], "img": meta["image_rows"], "ten": meta["image_rows"]}
    names = {"tab": "4 float32 + int32 label", "img": "32x32x3 PNG + label", "ten": "3,072 uint8 tensor + label"}
    for d in datasets:
        print(f"\n{d}: {rows[d]:,} rows of {names[d]}, batches of {BATCH[d]}; best of {args.rounds} rounds\n")
        print("| system | rows/s | vs hand | CPU s / 1M rows | process CPU s | first batch | peak extra MB | prep s |")
        print("|---|---|---|---|---|---|---|---|")
        hand = best(results.get(("hand", d), []), "rows_per_s", True)
        for s in systems:
            runs = results.get((s, d), [])
            pre = prep.get((PREPARED.get(s, s), d), {})
            ps = f"{pre['prep_s']:.1f}" if "prep_s" in pre else "-"
            failed = next((x["failed"] for x in runs if "failed" in x), None)
            if failed or not runs:
                print(f"| {s} | FAILED: {failed or 'not run'} | | | | | | {ps} |")
                continue
            rate = best(runs, "rows_per_s", True)
            capped = " (capped)" if any(x.get("capped") for x in runs) else ""  # stopped at --max-seconds
            print(
                f"| {s} | {fmt_rate(rate)}{capped} | {rate / hand:.2f}x | {best(runs, 'cpu_per_m', False):.3f} | "
                f"{best(runs, 'process_cpu_s', False):.1f} | {best(runs, 'first_s', False) * 1000:.0f} ms | "
                f"{best(runs, 'peak_mb', False):.0f} | {ps} |"
            )
    if takes:
        print(f"\nRandom access: {args.take_batches} batches of {TAKE} random positions of tab; best of rounds\n")
        print("| system | rows/s | vs dal | CPU s / 1M rows | first take (open included) |\n|---|---|---|---|---|")
        ref = best(results.get(("dal", "take"), []), "rows_per_s", True)
        for s in takes:
            runs = results.get((s, "take"), [])
            failed = next((x["failed"] for x in runs if "failed" in x), None)
            if failed:
                print(f"| {s} | FAILED: {failed} | | | |")
                continue
            rate = best(runs, "rows_per_s", True)
            print(
                f"| {s} | {fmt_rate(rate)} | {rate / ref:.2f}x | {best(runs, 'cpu_per_m', False):.3f} | "
                f"{best(runs, 'first_s', False) * 1000:.0f} ms |"
            )


if __name__ == "__main__":
    main()
