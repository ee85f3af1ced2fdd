"""Row groups much larger than a chunk (images, tensors: one row group holds many chunks' decoded bytes)
are decoded a chunk's rows at a time: the first batch waits for one slice's decoding, not the row group's,
and every path still hands out the same rows in the same order (plain, shuffled, resumed, loader workers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

torch = pytest.importorskip("torch")  # CI installs torch (dal[torch]); skipping fails the run there

import dal  # noqa: E402
from dal.catalog import Catalog  # noqa: E402

ROWS, ROW_GROUP, CHUNK = 3000, 1000, 100


@pytest.fixture
def wide(sqlite_env: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dal.Dataset:
    """3 row groups of 1,000 rows and chunks of 100 rows: every row group is ten chunks' worth."""
    import dal.read.reader

    monkeypatch.setattr(dal.read.reader, "MIN_CHUNK_ROWS", CHUNK)
    monkeypatch.setattr(dal.read.reader, "CHUNK_BYTES", 1)
    root = tmp_path / "wide"
    root.mkdir()
    ids = np.arange(ROWS)
    table = pa.table({"id": ids, "x": ids.astype(np.float32) * 2})
    pq.write_table(table, root / "part-0.parquet", row_group_size=ROW_GROUP)
    dal.register("t.wide", str(root), format="parquet")
    return dal.open("t.wide")


def ids_of(batches: list[dict[str, object]]) -> list[int]:
    return [int(i) for b in batches for i in b["id"]]  # type: ignore[attr-defined]


def test_a_row_group_is_converted_a_chunk_at_a_time(wide: dal.Dataset) -> None:
    converted: list[int] = []

    def convert(table: pa.Table) -> tuple[int, pa.Table]:
        converted.append(table.num_rows)
        return table.num_rows, table

    chunks = wide.scan().iter_chunks(convert=convert)
    first = next(chunks)
    assert first[0] == CHUNK
    # before the first chunk is handed out: the finishing threads and the queue, not the row group
    assert sum(converted) <= 4 * CHUNK < ROW_GROUP
    rest = list(chunks)
    assert all(n <= CHUNK for n, _ in rest)
    got = pa.concat_tables([first[1]] + [t for _, t in rest])
    assert got.column("id").to_pylist() == list(range(ROWS))  # pyarrow's order, every row once
    # loader workers take units of a chunk's rows too (each reads the row group, decodes its slices)
    units = wide.scan().to_torch(64)._stream(0).units
    assert len(units) == ROWS // CHUNK and all(u().num_rows == CHUNK for u in units)


def test_stats_count_every_slice_and_each_row_group_once(wide: dal.Dataset) -> None:
    scan = wide.scan()
    assert sum(t.num_rows for t in scan.iter_chunks()) == ROWS
    st = scan.stats()
    assert st.rows == ROWS and st.chunks == ROWS // CHUNK
    assert st.row_groups_read == ROWS // ROW_GROUP and st.files_read == 1
    meta = pq.ParquetFile(wide.files()[0].uri).metadata
    on_disk = sum(meta.row_group(g).column(c).total_compressed_size for g in range(3) for c in range(2))
    assert st.bytes_read == on_disk  # each row group's bytes counted once, not once per slice


@pytest.mark.parametrize("shuffled", [False, True])
def test_every_path_hands_out_the_same_rows_in_the_same_order(wide: dal.Dataset, shuffled: bool) -> None:
    from torch.utils.data import DataLoader

    scan = wide.shuffle(seed=4, buffer_size=1) if shuffled else wide.scan()
    direct = ids_of(list(scan.to_torch(64)))
    assert sorted(direct) == list(range(ROWS))
    assert (direct != list(range(ROWS))) == shuffled
    # the row order of to_arrow is the stream's (shuffled: per row group, the same permutation)
    assert scan.to_arrow().column("id").to_pylist() == direct
    assert ids_of(list(scan.to_torch(64).loader(num_workers=2))) == direct
    plain = ids_of(list(DataLoader(scan.to_torch(64), batch_size=None, num_workers=2)))
    assert sorted(plain) == list(range(ROWS))
    # resumed mid-row-group, on the direct path and through loader workers
    for resumed_by_loader in (False, True):
        data = scan.to_torch(64)
        it = iter(data)
        head = [next(it) for _ in range(7)]  # 448 rows: inside the first row group
        fresh = scan.to_torch(64)
        fresh.load_state_dict(data.state_dict())
        tail = list(fresh.loader(num_workers=2) if resumed_by_loader else fresh)
        assert ids_of(head) + ids_of(tail) == direct
    batches = list(scan.to_torch(64).loader(num_workers=2))
    for b in batches:
        assert torch.equal(b["x"], b["id"].to(torch.float32) * 2)


def _reference(root: Path) -> pa.Table:
    """delta-rs's own read of the table (QueryBuilder: the reference for Delta), ordered by id."""
    from deltalake import DeltaTable, QueryBuilder

    table = pa.table(QueryBuilder().register("t", DeltaTable(str(root))).execute("select * from t").read_all())
    views = {pa.binary_view(): pa.binary(), pa.string_view(): pa.string()}
    table = table.cast(pa.schema([f.with_type(views.get(f.type, f.type)) for f in table.schema]))
    return table.sort_by("id")


def test_page_by_page_reads_only_where_proven_and_every_read_equals_delta_rs(
    sqlite_env: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, paged_reads: list[Any]
) -> None:
    """A wide row group is read a slice of pages at a time only when that gives exactly the scanner's rows:
    no partition column, no filter, no shuffle, every column stored in the file in the scan's type. A Delta
    table (delta-rs wrote it: a partition column, binary cells, a column added by a later schema-merging
    append, so older files lack it) read every way equals delta-rs's QueryBuilder, and the spy shows which
    row groups were paged."""
    from deltalake import WriterProperties, write_deltalake

    import dal.read.reader as reader

    monkeypatch.setattr(reader, "MIN_CHUNK_ROWS", CHUNK)
    root = tmp_path / "delta"
    props = WriterProperties(max_row_group_size=ROW_GROUP)
    ids = np.arange(ROWS)
    first = pa.table({"id": ids, "x": ids.astype(np.float32) / 3, "blob": [bytes([i % 251]) * (i % 7) for i in ids],
                      "p": ids % 2})  # fmt: skip
    write_deltalake(str(root), first, partition_by=["p"], writer_properties=props)
    later = ids + ROWS
    second = pa.table({"id": later, "x": later.astype(np.float32) / 3, "blob": [b"z"] * ROWS, "p": later % 2,
                       "added": later.astype(np.int16)})  # fmt: skip
    write_deltalake(str(root), second, mode="append", schema_mode="merge", partition_by=["p"], writer_properties=props)
    dal.register("t.paged", str(root), format="delta")
    ds = dal.open("t.paged")
    want = _reference(root)

    def rows(scan: object) -> pa.Table:
        chunks = list(scan.iter_chunks())  # type: ignore[attr-defined]
        return pa.concat_tables(chunks).sort_by("id")

    cases = {
        ("id", "x", "blob"): True,  # in every file, as stored: paged
        ("id", "x", "added"): "some",  # the first write's files lack "added": those go through the scanner
        ("id", "p"): False,  # a partition column is not in the files
    }
    for columns, expect in cases.items():
        paged_reads.clear()
        got = rows(ds.select(*columns))
        assert got.equals(want.select(list(columns)).cast(got.schema)), columns
        files = {f.uri for f in ds.files()}
        if expect is True:
            assert {t.uri for t in paged_reads} == files
        elif expect == "some":
            assert paged_reads and {t.uri for t in paged_reads} < files
        else:
            assert not paged_reads
    for narrowed in (
        ds.select("id", "x").filter(dal.col("id") >= 0),
        ds.select("id", "x").shuffle(seed=2, buffer_size=1),
    ):
        paged_reads.clear()
        assert rows(narrowed).equals(want.select(["id", "x"]))
        assert not paged_reads  # a filter or a permutation: the scanner
    # resumed in the middle of a paged row group: the rows after it, in the stream's order
    paged_reads.clear()
    scan = ds.select("id", "x", "blob")
    order = pa.concat_tables(list(scan.iter_chunks())).column("id").to_pylist()
    resumed = pa.concat_tables(list(scan.iter_chunks(skip_rows=CHUNK + 37))).column("id").to_pylist()
    assert resumed == order[CHUNK + 37 :] and paged_reads
