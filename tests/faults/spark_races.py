"""Helpers of the Spark race tests: DataFrames whose tasks can be held, a write on a thread, waiting for a state,
and pausing this process's driver at a named point."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.faults.races import files_below


def frame(spark: Any, fmt: str, ids: list[int], block_at: int | None = None, release: Path | None = None) -> Any:
    """A DataFrame of ``ids`` (and, for Petastorm, 2x2 float tensors) in two partitions; with ``block_at``,
    the task computing that id waits until ``release`` exists: a write whose executors are still staging."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    df = spark.createDataFrame([(i,) for i in ids], "id long").repartition(2, "id")
    if block_at is not None:
        gate = str(release)

        def hold(i):  # type: ignore[no-untyped-def]  (no hints: Spark would take it for a pandas UDF)
            import os
            import time

            deadline = time.monotonic() + 300
            while i == block_at and not os.path.exists(gate) and time.monotonic() < deadline:
                time.sleep(0.05)
            return i

        df = df.select(F.udf(hold, T.LongType())("id").alias("id"))
    if fmt == "petastorm":
        x = F.col("id").cast("float")
        df = df.select("id", F.array(F.array(x, x), F.array(x, x)).alias("depth"))
    return df


@contextmanager
def in_thread(fn: Callable[[], Any]) -> Iterator[dict[str, Any]]:
    """Run ``fn`` on a thread for the block; its result (or error) once the block ends."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    out["thread"] = t
    try:
        yield out
    finally:
        t.join(timeout=300)
        assert not t.is_alive(), "the write did not finish"


def wait_for(condition: Callable[[], bool], out: dict[str, Any], what: str) -> None:
    deadline = time.monotonic() + 300
    while not condition():
        assert "error" not in out, out.get("error")
        assert out["thread"].is_alive() or condition(), f"the write ended before {what}: {out}"
        assert time.monotonic() < deadline, f"never {what}"
        time.sleep(0.05)


def complete(root: str, before: set[str]) -> set[str]:
    """The Parquet files below ``root`` not in ``before`` whose writer closed them (the footer's magic is there)."""
    out = set()
    for rel in files_below(root) - before:
        path = Path(root, rel)
        if rel.endswith(".parquet") and path.stat().st_size > 8:
            with open(path, "rb") as f:
                f.seek(-4, os.SEEK_END)
                if f.read() == b"PAR1":
                    out.add(rel)
    return out


def age(paths: set[str], root: str, seconds: float) -> None:
    then = time.time() - seconds
    for rel in paths:
        os.utime(Path(root, rel), (then, then))


def paused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, point: str) -> tuple[Path, Path]:
    marker, release = tmp_path / f"paused-{uuid.uuid4().hex[:8]}", tmp_path / f"release-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("DAL_TEST_PAUSE", point)
    monkeypatch.setenv("DAL_TEST_PAUSE_FILE", str(marker))
    monkeypatch.setenv("DAL_TEST_RELEASE_FILE", str(release))
    return marker, release
