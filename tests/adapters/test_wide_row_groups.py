"""Row groups much larger than a chunk (images, tensors: one row group holds many chunks' decoded bytes)
are decoded a chunk's rows at a time: the first batch waits for one slice's decoding, not the row group's,
and every path still hands out the same rows in the same order (plain, shuffled, resumed, loader workers)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

torch = pytest.importorskip("torch")  # CI installs torch (dal[torch]); skipping fails the run there

import dal  # noqa: E402
from catalog import Catalog  # noqa: E402

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
