"""A plan as columns (issue #34): without a filter, a Delta table's file tasks are the log's columns
(``FileTasks``), a ``ReadTask`` made only for a task a rank indexes or iterates. The arithmetic of a view (cuts
for ranks and DataLoader workers, row counts, slices, pickling) equals that of the list of the same tasks on
every case; on a real table the plan, its shards and a spawned process's copy equal the tasks one object per
file gives, and planning and sharding make no ``ReadTask`` at all.
"""

from __future__ import annotations

import multiprocessing
import pickle
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from deltalake import write_deltalake

import dal
from dal.catalog import Catalog
from dal.read.plan import cut, total
from dal.read.sharding import share
from dal.read.tasks import WHOLE_FILE, FileColumns, FileTasks, ReadTask


def _rows(tasks: list[ReadTask]) -> list[int]:
    return [t.length if t.length is not None else t.live_rows for t in tasks]


def _case(rng: random.Random) -> tuple[FileTasks, list[ReadTask]]:
    """Random files (some empty, some with deletion vectors, some under column mapping) as columns in log
    order, and as sorted objects."""
    n = rng.randint(0, 12)
    paths = [f"part={i % 3}/f{rng.randint(0, 99):02d}-{i}.parquet" for i in range(n)]
    rows = np.array([rng.randint(0, 7) for _ in range(n)], dtype=np.int64)
    parts = [(("part", str(v)),) for v in range(3)]
    gone = {
        p: tuple(sorted(rng.sample(range(int(r)), rng.randint(1, int(r)))))
        for p, r in zip(paths, rows, strict=True)
        if r and rng.random() < 0.3
    }
    exact = rng.random() < 0.2
    columns = FileColumns(pa.array(paths, pa.string()), "/t/", "/", rows, parts, np.arange(n) % 3, gone, exact)
    order = np.array(sorted(range(n), key=paths.__getitem__), dtype=np.intp)
    listed = [
        ReadTask(f"/t/{p}", WHOLE_FILE, parts[i % 3], int(r), deleted=gone.get(p, ()), exact=exact or p in gone)
        for i, (p, r) in enumerate(zip(paths, rows, strict=True))
    ]
    return FileTasks(columns, order), sorted(listed, key=lambda t: t.uri)


def test_views_cut_count_slice_and_pickle_as_the_list_of_their_tasks_does() -> None:
    rng = random.Random(34)
    for _ in range(200):
        tasks, listed = _case(rng)
        assert tasks == listed and list(tasks) == listed and [tasks[i] for i in range(len(tasks))] == listed
        assert tasks.task_rows().tolist() == _rows(listed)
        assert pickle.loads(pickle.dumps(tasks)) == listed
        if listed:
            assert tasks[-1] == listed[-1] and list(tasks[1::2]) == listed[1::2]
        for world in (1, 2, 3, 5):
            for remainder in ("pad", "drop", "keep"):
                for rank in range(world):
                    want = cut(listed, _rows(listed), share(sum(_rows(listed)), rank, world, remainder))
                    got = cut(tasks, tasks.task_rows(), share(total(tasks.task_rows()), rank, world, remainder))
                    assert isinstance(got, FileTasks) and list(got) == want
                    assert got.task_rows().tolist() == _rows(want)
                    for worker in range(2):  # a DataLoader worker's split of a rank's share: a cut of a cut
                        split = cut(got, got.task_rows(), share(total(got.task_rows()), worker, 2, "keep"))
                        assert list(split) == cut(want, _rows(want), share(sum(_rows(want)), worker, 2, "keep"))
                        assert pickle.loads(pickle.dumps(split)) == list(split)
    with pytest.raises(IndexError):
        _case(random.Random(1))[0][99]


@pytest.fixture
def table(sqlite_env: Catalog, tmp_path: Path) -> Path:
    """A partitioned Delta table of 12 files written by delta-rs, in several commits (the log's order is not
    the URIs' order)."""
    root = tmp_path / "t"
    for k in range(4):
        ids = np.arange(k * 30, (k + 1) * 30, dtype=np.int64)
        data = pa.table({"id": ids, "part": ids % 3, "s": [f"s{i}" for i in ids]})
        write_deltalake(str(root), data, mode="append", partition_by=["part"])
    dal.register("c.tasks", str(root))
    return root


def _one_object_per_file(ds: Any) -> list[ReadTask]:
    """The file tasks as planning made them before the plan became columns: one object per file, by URI."""
    tasks = [ReadTask(f.uri, WHOLE_FILE, f.partition_values, f.row_count, deleted=f.deleted_rows) for f in ds.files()]
    return sorted(tasks, key=lambda t: t.uri)


def _uris(tasks: Any) -> list[str]:  # in a spawned process: the tasks arrive pickled
    return [t.uri for t in tasks]


def test_a_plan_and_its_shards_make_no_task_object_and_equal_one_object_per_file(
    table: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = dal.open("c.tasks")
    expected = _one_object_per_file(ds)
    assert len(expected) == 12
    made = []
    init = ReadTask.__init__

    def counted(self: ReadTask, *args: Any, **kwargs: Any) -> None:
        made.append(1)
        init(self, *args, **kwargs)

    monkeypatch.setattr(ReadTask, "__init__", counted)
    scan = ds.scan()
    plan = scan.plan(row_groups=False)
    shards = [scan.shard(r, 5).plan(row_groups=False) for r in range(5)]
    assert scan.count() == 120 and [scan.shard(r, 5).count() for r in range(5)] == [24] * 5
    assert isinstance(plan, FileTasks) and all(isinstance(s, FileTasks) for s in shards)
    assert made == []  # planning, counting and sharding: arrays only
    assert plan == expected and made  # indexed or iterated: objects, equal to one per file
    made.clear()
    assert len(list(shards[2])) == len(shards[2]) == len(made) < len(expected)  # a rank: its share only
    by_objects = [cut(expected, _rows(expected), share(120, r, 5, "pad")) for r in range(5)]
    assert [list(s) for s in shards] == by_objects
    ctx = multiprocessing.get_context("spawn")  # as a DataLoader worker or a Spark task receives them
    with ctx.Pool(1) as pool:
        assert pool.map(_uris, [shards[2], plan]) == [[t.uri for t in by_objects[2]], [t.uri for t in expected]]
    got = pa.concat_tables([scan.shard(r, 5, remainder="keep").to_arrow() for r in range(5)])
    assert got.column("id").to_pylist() == scan.to_arrow().column("id").to_pylist()
    assert sorted(got.column("id").to_pylist()) == list(range(120))


def test_a_fresh_process_plans_without_pyarrow_dataset_or_pandas(table: Path) -> None:
    """The first ``dal.open`` and plan of a process cost the log, not imports: pyarrow imports pandas (~0.25 s
    CPU) on its first conversion of a Python value or to numpy, and ``pyarrow.dataset`` imports it too; a plan
    without a filter needs neither (delta-rs's own listing imports neither)."""
    code = (
        "import sys, dal\n"
        "scan = dal.open('c.tasks').scan()\n"
        "assert len(scan.plan(row_groups=False)) == 12 and scan.count() == 120\n"
        "print(sorted(m for m in ('pandas', 'pyarrow.dataset') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    assert out.stdout.strip() == "[]"
