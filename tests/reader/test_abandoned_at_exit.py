"""A training script that takes a few batches and exits (a smoke test, a notebook cell, ``break`` then the end
of the script) leaves dal's iterators open while the interpreter shuts down: the exit must be silent. Before,
the open pass's finally recorded its statistics through a lazy import (``ModuleNotFoundError: import of
dataclasses halted``) and closed a reader generator still running on its frozen thread (``ValueError: generator
already executing``), each printed as "Exception ignored in: <generator ...>" after every such script; and a
reader thread still inside pyarrow's C++ when the interpreter finalized was ended by CPython's pthread_exit, which
aborted the process ("terminate called without an active exception", exit status -6) in 1 of 4 to 10 runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import dal
from catalog import Catalog

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
import dal
ds = dal.open("t.exit")
kind = sys.argv[1]
if kind == "torch":
    it = iter(ds.scan().to_torch(1024))
elif kind == "shuffled":
    it = iter(ds.shuffle(seed=1).to_torch(1024))
elif kind == "batches":
    it = iter(ds.scan().iter_batches(1024))
else:
    it = iter(ds.scan().iter_chunks())
first = next(it)
print("took", kind, flush=True)
"""


@pytest.mark.parametrize("kind", ["torch", "shuffled", "batches", "chunks"])
def test_a_script_that_stops_reading_and_exits_prints_nothing(sqlite_env: Catalog, tmp_path: Path, kind: str) -> None:
    if kind in ("torch", "shuffled"):
        pytest.importorskip("torch")  # CI installs torch (dal[torch]); skipping fails the run there
    ids = np.arange(300_000)
    dal.write(pa.table({"id": ids, "x": ids.astype(np.float32)}), "t.exit", path=str(tmp_path / "t"))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for _ in range(3):  # both shutdown races are timing-dependent: noise in most runs, the abort in 1 of 4-10
        out = subprocess.run([sys.executable, "-c", SCRIPT, kind], capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0 and out.stdout.strip() == f"took {kind}", out.stderr
        assert out.stderr == ""
