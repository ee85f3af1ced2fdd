"""A change set larger than a small batch budget streams (issue #35): the change read is cut into pieces (a row
group of an appended file each) read lazily, so ``iter_batches`` over many appends holds a few pieces, not the
change set. Measured in a fresh process by pyarrow's memory pool peak (every Arrow buffer the read allocates),
rows by id against delta-rs's reads of the two versions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

import dal
from tests.changes.helpers import delta_rs_read

REPO = Path(__file__).resolve().parents[2]
APPENDS, ROWS, PAYLOAD = 32, 4_000, 512  # 32 appended files of 4,000 rows of 512 bytes: ~65 MB of changes

READ = """
import json, sys
import pyarrow as pa
import dal
url, name = sys.argv[1], sys.argv[2]
scan = dal.open(name, catalog=url).changes(since=0).select("id", "payload", "_change_type")
ids, peak = [], 0
for batch in scan.iter_batches(1_000):
    ids += batch.column("id").to_pylist()
    assert set(batch.column("_change_type").to_pylist()) == {"insert"}
    peak = max(peak, pa.total_allocated_bytes())
print(json.dumps({"ids": ids, "peak": peak, "pool_peak": pa.default_memory_pool().max_memory()}))
"""


def _append(first: int) -> pa.Table:
    ids = list(range(first, first + ROWS))
    return pa.table({"id": pa.array(ids, pa.int64()), "payload": [f"{i:0{PAYLOAD}d}" for i in ids]})


def test_a_change_set_larger_than_the_budget_streams_with_bounded_memory(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/catalog.db"
    path = str(tmp_path / "big")
    dal.write(_append(0), "big.t", path=path, catalog=url)
    for k in range(1, APPENDS + 1):
        dal.write(_append(k * ROWS), "big.t", catalog=url)
    change_bytes = APPENDS * ROWS * PAYLOAD
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", READ, url, "big.t"], capture_output=True, text=True, env=env, timeout=300, check=True
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    # rows by id: what the newest version holds and version 0 did not, as delta-rs reads both
    before = set(delta_rs_read(path, 0).column("id").to_pylist())
    after = set(delta_rs_read(path, APPENDS).column("id").to_pylist())
    assert sorted(result["ids"]) == sorted(after - before) and len(result["ids"]) == APPENDS * ROWS
    assert result["ids"] == sorted(result["ids"])  # commit order: each append after the one before
    # a few pieces (one file of ~2 MB each: kept, prefetched) in memory, never the ~65 MB change set
    assert result["pool_peak"] < change_bytes / 4, (result["pool_peak"], change_bytes)
