"""Chunks follow the decoded byte target: wide (tensor, image) rows are not held to a 16,384-row floor.

A chunk used to hold at least 16,384 rows whatever their width, so 20,000 PNGs were decoded before the first
batch (issue 26). Now a chunk aims at ``CHUNK_BYTES`` of decoded rows (tensor fields at their decoded
size), at least ``MIN_CHUNK_ROWS`` (256), and tabular chunks are as large as before."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

import dal
from dal import ImageCodec, ScalarCodec, TensorField, TensorSchema
from dal.catalog import Catalog
from dal.read import reader

ROWS, FILES, WIDTH = 1_000, 12, 4_096


def test_wide_rows_make_chunks_of_the_byte_target(sqlite_env: Catalog) -> None:
    rng = np.random.default_rng(3)
    written = []
    for k in range(FILES):  # one file (one row group) per write
        ids = np.arange(k * ROWS, (k + 1) * ROWS, dtype=np.int64)
        blobs = [rng.bytes(WIDTH) for _ in range(ROWS)]
        written.append(pa.table({"id": ids, "blob": pa.array(blobs, pa.binary())}))
        dal.write(written[-1], "wide")
    scan = dal.open("wide").scan()
    scan.plan()  # footers read: what chunk sizes come from
    target = reader.chunk_rows(scan.query)
    assert target == reader.CHUNK_BYTES // reader.row_bytes(scan.query) < ROWS  # ~500 rows of 4 KiB
    chunks = list(scan.iter_chunks())
    assert [c.num_rows for c in chunks] == [ROWS] * FILES  # one row group each, not 12,000 rows at once
    got = pa.concat_tables(chunks).sort_by("id")
    assert got.equals(pa.concat_tables(written))  # the same rows as one big chunk gave
    batches = list(scan.iter_batches(300))
    assert pa.Table.from_batches(batches).sort_by("id").equals(got)


def test_tabular_chunks_keep_their_size(sqlite_env: Catalog) -> None:
    n = 200_000
    table = pa.table({**{f"f{i}": np.ones(n, np.float32) for i in range(4)}, "label": np.arange(n, dtype=np.int32)})
    dal.write(table, "narrow")
    scan = dal.open("narrow").scan()
    scan.plan()
    query = scan.query
    assert reader.chunk_rows(query) >= 16_384  # 20-byte rows: ~100,000 rows of 2 MiB
    assert reader.chunk_rows(query) == min(reader.MAX_CHUNK_ROWS, int(reader.CHUNK_BYTES // reader.row_bytes(query)))


def test_tensor_fields_count_at_their_decoded_size(sqlite_env: Catalog) -> None:
    schema = TensorSchema(
        "Imgs",
        [TensorField("id", np.int64, (), ScalarCodec()), TensorField("img", np.uint8, (64, 64, 3), ImageCodec("png"))],
    )
    rows = [{"id": i, "img": np.full((64, 64, 3), i % 256, np.uint8)} for i in range(50)]
    dal.write(rows, "imgs", format="petastorm", schema=schema)
    scan = dal.open("imgs").scan()
    scan.plan()
    assert reader.row_bytes(scan.query) > 64 * 64 * 3  # flat PNGs are tiny; decoded, 12 KiB each
    assert reader.chunk_rows(scan.query) == reader.MIN_CHUNK_ROWS  # 2 MiB / 12 KiB < 256: the floor
    assert reader.row_bytes(scan.select("id").query) < 64 * 64 * 3  # without the image: its own width


def test_each_projection_sizes_its_own_chunks(sqlite_env: Catalog) -> None:
    """Two scans of one version with other columns share the plan cache; the row-group size each sizes its
    chunks by is its own projection's. Before, the first projection's size was cached for the filters and
    window alone: a narrow scan first made a later wide scan's chunks ~500x too many rows."""
    rng = np.random.default_rng(4)
    ids = np.arange(ROWS, dtype=np.int64)
    dal.write(pa.table({"id": ids, "blob": pa.array([rng.bytes(WIDTH) for _ in ids], pa.binary())}), "mixed")
    ds = dal.open("mixed")
    narrow, wide = ds.scan().select(["id"]), ds.scan().select(["id", "blob"])
    narrow.plan()
    wide.plan()
    narrow_bytes, wide_bytes = narrow.query.row_group_bytes()[0], wide.query.row_group_bytes()[0]
    assert wide_bytes > narrow_bytes * 100  # 4 KiB blobs against 8-byte ids
    assert reader.chunk_rows(wide.query) < reader.chunk_rows(narrow.query)
