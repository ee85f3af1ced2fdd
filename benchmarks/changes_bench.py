"""Reading what changed (issue #35): what ``changes(since=)`` reads, against the whole table.

    python benchmarks/changes_bench.py                 # 300 days x 2,000 rows; --days N --rows N

A Delta table partitioned by day (two files a day, two writes), then four versions: a one-day append, a
copy-on-write delete of 10 rows in one day (delta-rs, then ``dal sync``), ``dal optimize``, and
``overwrite="partitions"`` of one recomputed day. For each, the plan's files and bytes
(``dal.read.changes.plan_changes``: what the change read opens) against the table's, the rows returned, and the
time to plan and to read the changes (best of ``--rounds`` each) against ``to_arrow()`` of the whole version;
for the partition overwrite also the files it wrote, removed and left untouched.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DAL_PROGRESS", "0")

import pyarrow as pa  # noqa: E402

import dal  # noqa: E402
from dal.formats.changes import ChangePlan, FileChanges  # noqa: E402
from dal.read.changes import iter_changes, plan_changes  # noqa: E402


def _day(d: date, rows: int, start: int) -> pa.Table:
    ids = pa.array(range(start, start + rows), pa.int64())
    return pa.table({"id": ids, "day": [d.isoformat()] * rows, "value": pa.array([i * 0.5 for i in range(rows)])})


def _bytes(plan: ChangePlan) -> int:
    return sum(
        u.file.size_bytes if isinstance(u, FileChanges) else sum(f.size_bytes for f in (*u.removed, *u.added))
        for u in plan.units
    )


def _best(fn: Any, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=int, default=300)
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        catalog, path = f"sqlite:///{tmp}/catalog.db", str(Path(tmp, "events"))
        first = date(2026, 1, 1)
        days = [_day(first + timedelta(d), args.rows, d * args.rows) for d in range(args.days)]
        half = args.rows // 2  # two files a day, so that optimize has something to compact
        dal.write(pa.concat_tables([t.slice(0, half) for t in days]), "events", path=path, partition_by=["day"],
                  catalog=catalog)  # fmt: skip
        dal.write(pa.concat_tables([t.slice(half) for t in days]), "events", catalog=catalog)
        dal.write(_day(first + timedelta(args.days), args.rows, args.days * args.rows), "events", catalog=catalog)
        from deltalake import DeltaTable

        DeltaTable(path).delete(f"day = '{first.isoformat()}' AND id < 10")
        dal.sync("events", catalog=catalog)
        dal.lifecycle.optimize("events", catalog=catalog)
        redone = _day(first + timedelta(5), args.rows, 10**9)  # day 6 recomputed: new ids, the same day
        t = time.perf_counter()
        dal.write(redone, "events", mode="overwrite", overwrite="partitions", catalog=catalog)
        overwrite_s = time.perf_counter() - t
        cat = dal.get_catalog(catalog)
        info, versions = cat.get_dataset("events"), cat.versions("events")
        before, after = (dal.open("events", n, catalog=catalog).files() for n in (4, 5))
        kept = {f.uri for f in before} & {f.uri for f in after}
        written = [f for f in after if f.uri not in kept]
        rewrite = {
            "version": "overwrite='partitions' of one day",
            "files_written": len(written), "bytes_written": sum(f.size_bytes for f in written),
            "files_removed": len(before) - len(kept), "files_untouched": len(kept),
            "table_files": len(after), "table_bytes": sum(f.size_bytes for f in after),
            "write_s": round(overwrite_s, 4),
        }  # fmt: skip
        out: list[dict[str, Any]] = []
        for since, what in ((1, "one-day append"), (2, "delete of 10 rows in one day (copy-on-write)"),
                            (3, "dal optimize"), (4, "overwrite='partitions' of one day")):  # fmt: skip
            plan = plan_changes(info, versions, since, since + 1)
            plan_s = _best(lambda since=since: plan_changes(info, versions, since, since + 1), args.rounds)
            pinned = dal.open("events", since + 1, catalog=catalog)
            files = pinned.files()
            seconds = _best(lambda plan=plan: sum(t.num_rows for t in iter_changes(plan, {})), args.rounds)
            whole_s = _best(lambda pinned=pinned: pinned.to_arrow(), args.rounds)
            out.append({
                "version": what,
                "files_read": plan.files_read, "table_files": len(files),
                "bytes_read": _bytes(plan), "table_bytes": sum(f.size_bytes for f in files),
                "rows_returned": sum(t.num_rows for t in iter_changes(plan, {})),
                "plan_s": round(plan_s, 4), "read_s": round(seconds, 4), "to_arrow_s": round(whole_s, 4),
            })  # fmt: skip
        out.append(rewrite)
        print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
