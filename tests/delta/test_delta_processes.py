"""Real processes: concurrent appenders both land; a writer killed mid-write leaves everything as it was."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import deltalake
import pyarrow as pa

import dal
from dal.catalog import Catalog

WRITES = 6


def _appender(url: str, warehouse: str, writer: int, start: mp.synchronize.Event, out: mp.Queue) -> None:  # type: ignore[name-defined]
    os.environ["DAL_CATALOG_URL"] = url
    os.environ["DAL_WAREHOUSE"] = warehouse
    start.wait()
    numbers = []
    for i in range(WRITES):
        ids = [writer * 1000 + i * 10 + k for k in range(10)]
        numbers.append(dal.write(pa.table({"id": ids, "w": [writer] * 10}), "conc.ds").number)
    out.put((writer, numbers))


def test_two_processes_appending_at_once_both_land(cat: Catalog) -> None:
    dal.write(pa.table({"id": pa.array([], pa.int64()), "w": pa.array([], pa.int64())}), "conc.ds")
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_appender, args=(os.environ["DAL_CATALOG_URL"], os.environ["DAL_WAREHOUSE"], w, start, out))
        for w in (1, 2)
    ]
    for p in procs:
        p.start()
    start.set()
    results = dict(out.get(timeout=240) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0, 0]

    versions = cat.versions("conc.ds")
    assert [v.number for v in versions] == list(range(1 + 2 * WRITES))
    assert [v.storage_version for v in versions] == list(range(1 + 2 * WRITES))
    returned = sorted(n for ns in results.values() for n in ns)
    assert returned == list(range(1, 1 + 2 * WRITES))  # every write got its own version
    expected = sorted(w * 1000 + i * 10 + k for w in (1, 2) for i in range(WRITES) for k in range(10))
    assert sorted(dal.open("conc.ds").to_arrow().column("id").to_pylist()) == expected
    # each returned version holds that writer's rows up to then
    for w, numbers in results.items():
        for i, n in enumerate(numbers):
            rows = dal.open("conc.ds", n).to_arrow().to_pylist()
            assert {r["id"] for r in rows if r["w"] == w} == {
                w * 1000 + j * 10 + k for j in range(i + 1) for k in range(10)
            }


KILLED_WRITER = textwrap.dedent(
    """
    import sys, time, pathlib
    import pyarrow as pa
    import dal

    marker = pathlib.Path(sys.argv[1])
    schema = pa.schema([("id", pa.int64()), ("payload", pa.string())])

    def batches():
        for i in range(10_000):
            if i == 5:
                marker.write_text("inside the write")
            yield pa.record_batch([pa.array(range(i * 1000, (i + 1) * 1000)), pa.array(["x" * 100] * 1000)], schema=schema)
            time.sleep(0.02)

    dal.write(pa.RecordBatchReader.from_batches(schema, batches()), "killed.ds")
    print("finished")  # never reached: the test kills us first
    """
)


def test_writer_killed_mid_write_leaves_table_and_catalog_unchanged(cat: Catalog, tmp_path: Path) -> None:
    first = pa.table({"id": [1, 2, 3], "payload": ["a", "b", "c"]})
    dal.write(first, "killed.ds")
    location = cat.get_dataset("killed.ds").location
    before = (cat.versions("killed.ds"), deltalake.DeltaTable(location).version())

    script = tmp_path / "writer.py"
    script.write_text(KILLED_WRITER)
    marker = tmp_path / "marker"
    proc = subprocess.Popen([sys.executable, str(script), str(marker)], env=os.environ.copy())
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert proc.poll() is None, "the writer ended before it was killed"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL

    assert (cat.versions("killed.ds"), deltalake.DeltaTable(location).version()) == before
    assert dal.open("killed.ds").to_arrow().sort_by("id").to_pylist() == first.to_pylist()
    nxt = dal.write(pa.table({"id": [4], "payload": ["d"]}), "killed.ds")
    assert (nxt.number, nxt.row_count) == (1, 4)
    assert sorted(dal.open("killed.ds").to_arrow().column("id").to_pylist()) == [1, 2, 3, 4]
