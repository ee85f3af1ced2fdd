"""``scan.stats()``, ``Dataset.stats()`` and the read log's ``stats``: rows, bytes, files and row groups read and
pruned, passes, time and file-cache hits — checked against pyarrow on the files (footers, row counts) and, for the
cache, against the bytes an S3 API (moto behind a counting proxy) actually served."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

import dal
from dal import lineage
from dal.catalog import Catalog
from dal.read.stats import ReadStats
from tests.conftest import use_catalog
from tests.storage.test_local_cache import batches, epoch, proxy, store, table  # noqa: F401  (fixtures)

PARTS = 4
ROWS_PER_PART = 4_000
ROW_GROUP = 1_000


@pytest.fixture(autouse=True)
def fresh_log() -> Iterator[None]:
    lineage.clear_read_log()
    yield
    lineage.clear_read_log()


@pytest.fixture
def cat(sqlite_url: str, tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch) -> Catalog:
    return use_catalog(sqlite_url, tmp_path, monkeypatch)


@pytest.fixture
def plain(cat: Catalog, tmp_path: Path) -> Path:
    """Hive-partitioned Parquet written by pyarrow (not dal): 4 partitions, 4 row groups of 1,000 rows each, ids
    sorted so row-group statistics can prune; registered as a read-only parquet dataset."""
    root = tmp_path / "plain"
    for p in range(PARTS):
        ids = pa.array(range(p * ROWS_PER_PART, (p + 1) * ROWS_PER_PART), pa.int64())
        t = pa.table({"id": ids, "x": pc.multiply(ids.cast(pa.float64()), 0.5), "s": pc.cast(ids, pa.string())})
        (root / f"part={p}").mkdir(parents=True)
        pq.write_table(t, root / f"part={p}" / "data.parquet", row_group_size=ROW_GROUP)
    dal.register("stats.plain", str(root), format="parquet")
    return root


def footer_bytes(root: Path, parts: list[int], groups: list[int], columns: set[str]) -> int:
    """Compressed bytes of ``columns`` in row groups ``groups`` of the files of ``parts``, read by pyarrow."""
    total = 0
    for p in parts:
        md = pq.ParquetFile(root / f"part={p}" / "data.parquet").metadata
        for g in groups:
            rg = md.row_group(g)
            total += sum(
                rg.column(c).total_compressed_size
                for c in range(rg.num_columns)
                if rg.column(c).path_in_schema in columns
            )
    return total


def test_a_filtered_scan_counts_what_it_read_and_what_it_pruned(plain: Path) -> None:
    ds = dal.open("stats.plain")
    scan = ds.select("id", "x").filter("part = 1 AND id < 5500")
    assert scan.stats() == ReadStats("stats.plain", 0)  # nothing read yet
    got = scan.to_arrow()
    reference = pads.dataset(plain, format="parquet", partitioning="hive").to_table(
        columns=["id", "x"], filter=(pc.field("part") == 1) & (pc.field("id") < 5500)
    )
    assert got.num_rows == reference.num_rows == 1_500
    st = scan.stats()
    assert (st.reads, st.rows) == (1, 1_500)
    assert (st.files_read, st.files_pruned) == (1, PARTS - 1)  # partition pruning: 3 files never opened
    # statistics: ids 4000..7999 in 4 groups of 1,000; id < 5500 keeps the first two
    assert (st.row_groups_read, st.row_groups_pruned) == (2, 2)
    assert st.bytes_read == footer_bytes(plain, [1], [0, 1], {"id", "x"})
    assert st.chunks >= 1 and st.seconds > 0
    assert (st.cache_hits, st.cache_misses, st.cache_bytes_fetched) == (0, 0, 0)  # local: no file cache


def test_passes_epochs_narrowed_scans_and_the_dataset(plain: Path) -> None:
    ds = dal.open("stats.plain")
    scan = ds.scan()
    assert sum(b.num_rows for b in scan.iter_batches(700, num_epochs=2)) == 2 * PARTS * ROWS_PER_PART
    st = scan.stats()
    assert (st.reads, st.rows, st.files_read, st.row_groups_read) == (2, 32_000, 8, 32)  # summed over both epochs
    assert st.bytes_read == 2 * footer_bytes(plain, list(range(PARTS)), list(range(4)), {"id", "x", "s"})
    assert st.files_pruned == st.row_groups_pruned == 0
    narrowed = scan.select("id")
    assert narrowed.stats().reads == 0  # a narrowed scan counts its own reads
    assert narrowed.count() == 16_000 and narrowed.stats().reads == 0  # counting reads no chunk
    narrowed.to_arrow()
    assert narrowed.stats().bytes_read == footer_bytes(plain, list(range(PARTS)), list(range(4)), {"id"})
    assert scan.stats() == st
    total = ds.stats()
    assert (total.reads, total.rows) == (3, 48_000)
    assert total.bytes_read == st.bytes_read + narrowed.stats().bytes_read


def test_a_pass_left_early_counts_what_was_handed_out(plain: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dal.read import reader

    monkeypatch.setattr(reader, "MIN_CHUNK_ROWS", ROW_GROUP)  # chunks of one row group: 16 chunks, not 1
    monkeypatch.setattr(reader, "CHUNK_BYTES", 1)
    scan = dal.open("stats.plain").scan()
    it = scan.iter_chunks()
    first = next(it)
    it.close()
    st = scan.stats()
    assert st.reads == 1 and st.chunks == 1 and st.rows == first.num_rows == ROW_GROUP
    assert (st.files_read, st.row_groups_read) == (1, 1)  # what was handed out, not what was read ahead


def test_the_read_log_carries_each_entrys_statistics(plain: Path) -> None:
    ds = dal.open("stats.plain")
    ds.to_arrow()
    ds.filter("part = 2").to_arrow()
    ds.filter("part = 2").to_arrow()
    log = {(r.dataset, r.filters): r for r in dal.read_log()}
    whole, part = log[("stats.plain", None)], log[("stats.plain", "part = 2")]
    assert whole.stats is not None and whole.stats["rows"] == 16_000 and whole.stats["reads"] == 1
    assert part.stats is not None and part.stats["rows"] == 2 * 4_000 and part.stats["reads"] == 2
    assert part.stats["files_pruned"] == 2 * 3 and part.stats["files_read"] == 2
    assert part.to_dict()["stats"] == part.stats
    assert str(ReadStats(**part.stats)).startswith("stats.plain@0: 8,000 rows")


def test_dataloader_style_decoding_still_counts_rows(plain: Path) -> None:
    """A ``convert`` (decoding on the reading threads) hands out dicts, not tables: rows are counted before it."""
    scan = dal.open("stats.plain").select("id")
    out = list(scan.iter_chunks(convert=lambda t: {"id": t.column("id").to_numpy()}))
    assert sum(len(c["id"]) for c in out) == scan.stats().rows == 16_000


def test_a_sampled_scan_counts_rows_and_time(plain: Path) -> None:
    scan = dal.open("stats.plain").scan().sample(rows=1_000, seed=3)
    assert scan.to_arrow().num_rows == scan.stats().rows == 1_000


@pytest.mark.slow
def test_file_cache_hits_and_misses_match_what_s3_served(sqlite_env: Catalog, store, tmp_path: Path) -> None:  # noqa: F811
    bucket, options, counter = store
    dal.write(table(), "c.stats", path=f"s3://{bucket}/d", partition_by=["part"], storage_options=options)
    cached = dal.open("c.stats", storage_options=options, cache="local", cache_dir=str(tmp_path / "fc"))
    one, two = cached.scan(), cached.scan()
    first, _ = epoch(counter, lambda: batches(one))
    second, _ = epoch(counter, lambda: batches(two))
    a, b = one.stats(), two.stats()
    assert a.cache_misses > 0 and a.cache_bytes_fetched == first["data_bytes"] > 0  # what S3 served, per the proxy
    assert second["data_gets"] == 0
    assert b.cache_misses == 0 and b.cache_bytes_fetched == 0 and b.cache_hits > 0
    assert b.cache_bytes_from_cache >= b.bytes_read > 0 and b.rows == a.rows == 40_000
