"""Fixed-shape tensors and unsigned integers in Delta come back as written (issue 23 item 8).

Delta has no unsigned or fixed-size types: a ``FixedSizeList<uint8>`` used to come back as ``list<int16>``
(twice the bytes, int16 tensors, nothing said so). A fixed-shape tensor is now stored as binary cells of
its bytes, its Arrow type, dtype and shape in the Delta column metadata, and restored exactly on every read
path; delta-rs reads the table (a binary column)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import deltalake
import numpy as np
import pyarrow as pa
import pytest

import dal
from dal.adapters.arrays import matrix
from dal.catalog import Catalog, DatasetNotFound
from dal.errors import SchemaMismatch
from dal.formats.logical import decode_tensor, encode_tensor

N = 3_000


def _tensor(values: np.ndarray) -> pa.Array:
    """A (rows, *shape) NumPy array as nested FixedSizeList arrays."""
    out: pa.Array = pa.array(values.reshape(-1))
    for size in reversed(values.shape[1:]):
        out = pa.FixedSizeListArray.from_arrays(out, size)
    return out


@pytest.fixture
def data() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {
        "img": rng.integers(0, 256, size=(N, 8, 8, 3), dtype=np.uint8),
        "u16": rng.integers(0, 2**16, size=(N, 5), dtype=np.uint16),
        "half": rng.standard_normal((N, 2)).astype(np.float16),
        "emb": rng.standard_normal((N, 4)).astype(np.float32),
        "u8": rng.integers(0, 256, size=N, dtype=np.uint8),
    }


def _table(data: dict[str, np.ndarray]) -> pa.Table:
    cols = {"id": pa.array(np.arange(N, dtype=np.int64))}
    for name, values in data.items():
        cols[name] = pa.array(values) if values.ndim == 1 else _tensor(values)
    return pa.table(cols)


def test_tensors_and_unsigned_round_trip_bit_exact(sqlite_env: Catalog, data: dict[str, np.ndarray]) -> None:
    table = _table(data)
    v = dal.write(table, "tensors")
    ds = dal.open("tensors")
    out = ds.to_arrow().sort_by("id")
    assert out.schema.types == table.schema.types  # fixed_size_list<uint8>[3]…, uint8: not list<int16>
    assert out.equals(table)
    for name, values in data.items():  # bit-exact against NumPy, through the torch/tf conversion
        got = matrix(out.column(name)) if values.ndim > 1 else out.column(name).to_numpy()
        assert got.dtype == values.dtype and got.shape == values.shape
        assert got.tobytes() == values.tobytes(), name
    # the catalog shows the written types
    types = {f.name: f.type for f in v.schema.fields}
    assert types["img"] == str(table.schema.field("img").type) and types["u8"] == "uint8"
    # a filter, a projection and a shard read the same rows as written
    sub = ds.scan().filter("id >= 1000 AND id < 2000").select("id", "img")
    part = pa.concat_tables(sub.shard(r, 2).to_arrow() for r in range(2)).sort_by("id")
    assert part.equals(table.select(["id", "img"]).slice(1000, 1000))
    batches = list(sub.iter_batches(300))
    assert all(b.schema.field("img").type == table.schema.field("img").type for b in batches)


def test_delta_rs_reads_the_table_as_binary(sqlite_env: Catalog, data: dict[str, np.ndarray]) -> None:
    dal.write(_table(data), "tensors")
    location = dal.open("tensors").location
    table = deltalake.DeltaTable(location)
    fields = {f.name: f for f in table.schema().fields}
    assert fields["img"].type.type == "binary"
    meta = json.loads(fields["img"].metadata["dal.tensor"])
    assert (meta["dtype"], meta["shape"], meta["byteorder"]) == ("uint8", [8, 8, 3], "little")
    got = deltalake.QueryBuilder().register("t", table).execute("SELECT id, img, emb FROM t ORDER BY id").read_all()
    got = pa.table(got)
    assert got.column("img").to_pylist() == [row.tobytes() for row in data["img"]]
    assert got.column("emb").to_pylist() == [row.astype("<f4").tobytes() for row in data["emb"]]


def test_torch_gets_uint8_tensors(sqlite_env: Catalog, data: dict[str, np.ndarray]) -> None:
    pytest.importorskip("torch")
    dal.write(_table(data), "tensors")
    batches = list(dal.open("tensors").scan().select("id", "img", "half").to_torch(512))
    ids = np.concatenate([b["id"].numpy() for b in batches])
    img = np.concatenate([b["img"].numpy() for b in batches])
    half = np.concatenate([b["half"].numpy() for b in batches])
    order = np.argsort(ids)
    assert img.dtype == np.uint8 and img.shape == (N, 8, 8, 3)
    assert img[order].tobytes() == data["img"].tobytes()
    assert half[order].tobytes() == data["half"].tobytes()


def test_a_chunk_of_a_tensor_column_is_one_buffer_not_copied() -> None:
    values = np.arange(4 * 6, dtype=np.uint16).reshape(4, 2, 3)
    stored = encode_tensor(_tensor(values).slice(1), "t")  # a slice: offsets honoured
    assert stored.to_pylist() == [row.tobytes() for row in values[1:]]
    logical = _tensor(values).type
    restored = decode_tensor(stored, logical, "t")
    assert restored.type == logical and restored.equals(_tensor(values).slice(1))
    inner = restored.values.values  # the uint16 values: a view of the binary column's data buffer
    data = stored.buffers()[2]
    assert data.address <= inner.buffers()[1].address < data.address + data.size
    m = matrix(restored)
    assert m is not None and m.shape == (3, 2, 3) and not m.flags.owndata


def test_null_cells_stay_null(sqlite_env: Catalog) -> None:
    col = pa.array([[1, 2], None, [3, 4]], pa.list_(pa.uint8(), 2))
    dal.write(pa.table({"id": [0, 1, 2], "t": col}), "nulls")
    out = dal.open("nulls").to_arrow().sort_by("id")
    assert out.column("t").type == col.type and out.column("t").to_pylist() == [[1, 2], None, [3, 4]]


def test_a_null_inside_a_tensor_is_refused_before_writing(sqlite_env: Catalog) -> None:
    col = pa.array([[1, None]], pa.list_(pa.uint8(), 2))
    with pytest.raises(SchemaMismatch, match="'t'.*null element"):
        dal.write(pa.table({"id": [0], "t": col}), "bad")
    assert not (Path(os.environ["DAL_WAREHOUSE"]) / "bad" / "_delta_log").exists()
    with pytest.raises(DatasetNotFound):
        dal.open("bad")


def test_appends_keep_the_type_and_another_shape_is_refused(sqlite_env: Catalog, data: dict[str, np.ndarray]) -> None:
    table = _table(data)
    dal.write(table.slice(0, 100), "tensors")
    dal.write(table.slice(100, 100), "tensors")
    assert dal.open("tensors").to_arrow().sort_by("id").equals(table.slice(0, 200))
    other = table.set_column(2, "img", _tensor(data["img"][:, :4]))  # (4, 8, 3): another shape
    with pytest.raises(SchemaMismatch, match="img"):
        dal.write(other.slice(0, 10), "tensors")
    assert dal.open("tensors").count() == 200


def test_tf_gets_tensors_of_their_shape(sqlite_env: Catalog, data: dict[str, np.ndarray]) -> None:
    tf = pytest.importorskip("tensorflow")
    dal.write(_table(data).slice(0, 600), "tensors")
    ds = dal.open("tensors").scan().select("id", "img", "u16").to_tf(256)
    assert ds.element_spec["img"].shape.as_list() == [None, 8, 8, 3] and ds.element_spec["img"].dtype == tf.uint8
    got = list(ds.as_numpy_iterator())
    ids = np.concatenate([b["id"] for b in got])
    img = np.concatenate([b["img"] for b in got])[np.argsort(ids)]
    u16 = np.concatenate([b["u16"] for b in got])[np.argsort(ids)]
    assert img.tobytes() == data["img"][:600].tobytes() and u16.tobytes() == data["u16"][:600].tobytes()
