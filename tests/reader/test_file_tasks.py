"""Plans that open no file they do not have to (issue #34): without a filter or shuffle a plan is one task per
file, its rows the count the log records; a rank opens only the files of its share, and ``count()`` none.

"Opens no file" is shown on real files: the files a plan must not open are moved away before it runs, and a
plan that opened one would fail (dal reports a vanished file). Rows are compared with delta-rs' own reader
(``QueryBuilder``); shards are disjoint, cover every row once and are equal; resumption gives exactly the rows
left; a ``numRecords`` that lies is a FormatError when the file is read.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder, WriterProperties, write_deltalake

import dal
from dal.catalog import Catalog
from dal.errors import DalError, FormatError
from dal.formats.delta import replay
from tests.conformance.conftest import CORPUS
from tests.conformance.test_delta_conformance import same_rows

FILES, ROWS, GROUP = 7, 230, 50  # rows per file, rows per row group: 5 row groups a file, the last short


def _delta_rs(path: Path) -> pa.Table:
    return pa.table(QueryBuilder().register("t", DeltaTable(str(path))).execute("select * from t").read_all())


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


@pytest.fixture
def table(sqlite_env: Catalog, tmp_path: Path) -> Path:
    """A Delta table written by delta-rs: FILES files of ROWS rows, row groups of GROUP rows."""
    root = tmp_path / "t"
    props = WriterProperties(max_row_group_size=GROUP, write_batch_size=GROUP)
    for k in range(FILES):
        ids = np.arange(k * ROWS, (k + 1) * ROWS, dtype=np.int64)
        write_deltalake(str(root), pa.table({"id": ids, "x": ids * 0.5}), mode="append", writer_properties=props)
    dal.register("f.tasks", str(root))
    return root


def _data_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.parquet") if "_delta_log" not in p.parts)


def _hide(files: list[Path]) -> None:
    for f in files:
        f.rename(f.with_name(f.name + ".away"))


def _restore(root: Path) -> None:
    for f in root.rglob("*.away"):
        f.rename(f.with_name(f.name[: -len(".away")]))


def test_the_table_has_several_row_groups_per_file(table: Path) -> None:
    import pyarrow.parquet as pq

    files = _data_files(table)
    assert len(files) == FILES
    assert all(pq.ParquetFile(f).metadata.num_row_groups == 5 for f in files)


def test_a_plan_without_filter_is_one_task_per_file_and_opens_none(table: Path) -> None:
    _hide(_data_files(table))  # any footer read now fails
    ds = dal.open("f.tasks")
    scan = ds.scan()
    assert scan.count() == FILES * ROWS
    assert [scan.shard(r, 3).count() for r in range(3)] == [-(-FILES * ROWS // 3)] * 3
    assert sum(scan.shard(r, 4, remainder="keep").count() for r in range(4)) == FILES * ROWS
    tasks = scan.plan(row_groups=False)
    assert len(tasks) == FILES and all(t.whole_file and t.num_rows == ROWS for t in tasks)
    assert sum(scan.task_rows(tasks)) == FILES * ROWS
    with pytest.raises(DalError, match="no longer readable"):
        scan.to_arrow()  # reading must open them: the files really are gone


def test_rows_equal_delta_rs_and_the_plan_equals_the_row_group_plan(table: Path) -> None:
    ds = dal.open("f.tasks")
    expected = _delta_rs(table)
    got = ds.to_arrow()
    assert ds.count() == got.num_rows == expected.num_rows == FILES * ROWS
    assert _ids(got) == _ids(expected)
    assert got.sort_by("id").equals(expected.select(got.schema.names).sort_by("id"))
    # a plan's row-group tasks are those planning by footers gives, cut the same way
    query = ds.scan()._source.query  # type: ignore[attr-defined]
    assert ds.scan().plan() == query.all_tasks()
    for world in (3, 4):
        for rank in range(world):
            by_files = ds.scan().shard(rank, world).plan()
            by_groups = query.shard(query.all_tasks(), rank, world, "pad")
            assert by_files == by_groups


@pytest.mark.parametrize("world", [3, 4])
def test_a_rank_opens_only_its_files_and_shards_are_exact(table: Path, world: int) -> None:
    ds = dal.open("f.tasks")
    whole = ds.to_arrow().column("id").to_pylist()
    assert sorted(whole) == _ids(_delta_rs(table))
    shards = []
    for rank in range(world):
        scan = ds.scan().shard(rank, world, remainder="keep")
        mine = {t.uri for t in scan.plan(row_groups=False)}
        others = [f for f in _data_files(table) if not any(u.endswith(f.name) for u in mine)]
        assert len(mine) < FILES and others
        _hide(others)
        try:
            fresh = dal.open("f.tasks").scan().shard(rank, world, remainder="keep")
            got = fresh.to_arrow()
            assert fresh.count() == got.num_rows
        finally:
            _restore(table)
        shards.append(got.column("id").to_pylist())
    assert [i for s in shards for i in s] == whole  # disjoint, covering, in the scan's order
    assert max(map(len, shards)) - min(map(len, shards)) <= 1
    padded = [ds.scan().shard(r, world).to_arrow().num_rows for r in range(world)]
    assert len(set(padded)) == 1


def test_resume_mid_epoch_gives_exactly_the_remaining_rows(table: Path) -> None:
    pytest.importorskip("torch")
    ds = dal.open("f.tasks")
    scan = ds.scan().shard(1, 3)
    full = [int(i) for b in scan.to_torch(37) for i in b["id"]]
    data = scan.to_torch(37)
    it = iter(data)
    seen = [int(i) for _ in range(5) for i in next(it)["id"]]
    state = json.loads(json.dumps(data.state_dict()))
    fresh = dal.open("f.tasks").scan().shard(1, 3).to_torch(37)
    fresh.load_state_dict(state)
    rest = [int(i) for b in fresh for i in b["id"]]
    assert seen + rest == full and len(full) == -(-FILES * ROWS // 3)


def test_dataloader_splits_of_file_tasks_cover_the_shard(table: Path) -> None:
    scan = dal.open("f.tasks").scan().shard(0, 2, remainder="keep")
    whole = scan.to_arrow().column("id").to_pylist()
    parts = [pa.Table.from_batches(list(scan.iter_batches(19, tasks=scan.split(i, 3)))) for i in range(3)]
    assert [i for p in parts for i in p.column("id").to_pylist()] == whole
    # the file tasks of a plan read as they are: their row groups resolved as each file is opened
    by_files = pa.Table.from_batches(list(scan.iter_batches(23, tasks=scan.plan(row_groups=False))))
    assert by_files.column("id").to_pylist() == whole


def test_a_filter_or_a_shuffle_still_plans_row_groups(table: Path) -> None:
    ds = dal.open("f.tasks")
    assert all(not t.whole_file for t in ds.scan().filter("id >= 100").plan(row_groups=False))
    shuffled = ds.scan().shuffle(seed=5)
    assert all(not t.whole_file for t in shuffled.plan(row_groups=False))
    assert sorted(shuffled.to_arrow().column("id").to_pylist()) == list(range(FILES * ROWS))
    assert ds.scan().filter("id >= 100").count() == FILES * ROWS - 100


def test_a_lying_num_records_is_a_format_error_when_read(
    sqlite_env: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replay, "FOOTER_CHECKS", 0)  # registration checks none: the read must
    root = tmp_path / "lie"
    write_deltalake(str(root), pa.table({"id": list(range(10))}))
    log = root / "_delta_log" / f"{0:020d}.json"
    actions = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    for a in actions:
        if "add" in a:
            stats = json.loads(a["add"]["stats"])
            stats["numRecords"] = 11
            a["add"]["stats"] = json.dumps(stats)
    log.write_text("".join(json.dumps(a) + "\n" for a in actions))
    dal.register("f.lie", str(root))
    ds = dal.open("f.lie")
    assert ds.count() == 11  # the log's word, no file opened
    with pytest.raises(FormatError, match="holds 10 rows by its Parquet footer but the version says 11"):
        ds.to_arrow()
    with pytest.raises(FormatError, match="holds 10 rows by its Parquet footer but the version says 11"):
        ds.scan().shard(1, 2).to_arrow()


def test_deletion_vectors_from_the_corpus(tmp_path: Path) -> None:
    src = CORPUS / "delta-golden" / "dv-partitioned-with-checkpoint"
    if not src.is_dir():
        pytest.skip("the conformance corpus is absent")  # /work/shared/conformance: present where tests run
    root = tmp_path / "dv"
    shutil.copytree(src, root)
    catalog = f"sqlite:///{tmp_path}/catalog.db"
    dal.register("f.dv", str(root), catalog=catalog)
    ds = dal.open("f.dv", catalog=catalog)
    assert any(f.deleted_rows for f in ds.files())
    tasks = ds.scan().plan(row_groups=False)
    assert tasks and all(t.whole_file for t in tasks)
    expected = _delta_rs(root)
    assert ds.count() == ds.to_arrow().num_rows == expected.num_rows
    assert same_rows(ds.to_arrow(), expected) is None
    for world in (3, 4):
        shards = [ds.scan().shard(r, world, remainder="keep").to_arrow() for r in range(world)]
        assert pa.concat_tables(shards).equals(ds.to_arrow())
        assert len({ds.scan().shard(r, world).count() for r in range(world)}) == 1


def test_petastorm_files_with_recorded_counts(sqlite_env: Catalog, tmp_path: Path) -> None:
    from dal import ScalarCodec, TensorField, TensorSchema

    schema = TensorSchema("Ids", [TensorField("id", np.int64, (), ScalarCodec())])
    for k in range(4):
        ids = np.arange(k * 10, k * 10 + 10, dtype=np.int64)
        dal.write({"id": ids}, "f.peta", format="petastorm", schema=schema if k == 0 else None)
    ds = dal.open("f.peta")
    tasks = ds.scan().plan(row_groups=False)
    assert len(tasks) >= 4 and all(t.whole_file for t in tasks)
    assert ds.count() == 40 == ds.to_arrow().num_rows
    shards = [ds.scan().shard(r, 3, remainder="keep").to_arrow().column("id").to_pylist() for r in range(3)]
    assert sorted(i for s in shards for i in s) == list(range(40))


def test_files_without_a_recorded_count_are_planned_by_their_footers(sqlite_env: Catalog, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    root = tmp_path / "plain"
    root.mkdir()
    for k in range(3):
        pq.write_table(pa.table({"id": list(range(k * 30, k * 30 + 30))}), root / f"p{k}.parquet", row_group_size=10)
    dal.register("f.plain", str(root), format="parquet")
    scan = dal.open("f.plain").scan()
    tasks = scan.plan(row_groups=False)
    assert len(tasks) == 9 and not any(t.whole_file for t in tasks)  # no count to trust: footers, as before
    assert scan.count() == 90 and scan.plan() == tasks


def test_the_log_listing_spells_partition_values_as_data_files_do() -> None:
    from dal.formats.index import FileIndex

    files = pa.table(
        {
            "path": ["a.parquet", "b.parquet", "c.parquet", "d.parquet"],
            "size_bytes": [1, 2, 3, 4],
            "num_records": [5, None, 7, 8],
            "partition.f": pa.array([0.0, -0.0, None, 0.0], pa.float64()),
            "partition.s": ["x", "x", "y", None],
        }
    )
    index = FileIndex("/data/t", files, ("f", "s"), {"b.parquet": (0, 1)})
    located, sizes, counts, values, deleted = index.listing()
    assert values == [
        (("f", "0.0"), ("s", "x")),
        (("f", "-0.0"), ("s", "x")),  # equal to 0.0, spelled apart
        (("f", None), ("s", "y")),
        (("f", "0.0"), ("s", None)),
    ]
    assert counts == [5, None, 7, 8] and sizes == [1, 2, 3, 4] and deleted == [(), (0, 1), (), ()]
    made = index.data_files()
    assert [(f.uri, f.size_bytes, f.row_count, f.partition_values, f.deleted_rows) for f in made] == list(
        zip(located, sizes, counts, values, deleted, strict=True)
    )
    assert located[0].endswith("/data/t/a.parquet")
