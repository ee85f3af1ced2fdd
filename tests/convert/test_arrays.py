"""Fixed-length numeric arrays (what dal.convert and Spark writes make of MLlib vectors) as tensors: one
(batch, n) tensor in to_torch, TensorSpec((None, n)) in to_tf; variable-length arrays as lists / ragged.
Delta stores a FixedSizeList as a plain list: the length is found in the data."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import dal
from dal.catalog import Catalog
from dal.errors import DalError

N = 10


@pytest.fixture
def arrays(sqlite_env: Catalog) -> dal.Dataset:
    table = pa.table(
        {
            "id": pa.array(range(N)),
            "v": pa.array([[float(i)] * 3 for i in range(N)], pa.list_(pa.float32())),  # a converted vector
            "fsl": pa.array([[float(i), 1.0] for i in range(N)], pa.list_(pa.float64(), 2)),
            "rag": pa.array([[i] * (i % 3) for i in range(N)], pa.list_(pa.int64())),
        }
    )
    dal.write(table, "t.arrays")
    return dal.open("t.arrays")


def test_fixed_length_arrays_are_one_2d_tensor_in_torch(arrays: dal.Dataset) -> None:
    torch = pytest.importorskip("torch")
    batch = next(iter(arrays.to_torch(batch_size=4)))
    assert isinstance(batch["v"], torch.Tensor) and tuple(batch["v"].shape) == (4, 3)
    assert batch["v"].dtype == torch.float32
    assert isinstance(batch["fsl"], torch.Tensor) and tuple(batch["fsl"].shape) == (4, 2)
    assert batch["fsl"].dtype == torch.float64
    np.testing.assert_array_equal(batch["v"][:, 0].numpy(), batch["id"].numpy().astype(np.float32))
    assert [len(r) for r in batch["rag"]] == [int(i) % 3 for i in batch["id"]]  # variable length: one per row


def test_fixed_length_arrays_have_a_2d_tensor_spec_in_tf(arrays: dal.Dataset) -> None:
    tf = pytest.importorskip("tensorflow")
    data = arrays.to_tf(batch_size=4)
    spec = data.element_spec
    assert spec["v"] == tf.TensorSpec((None, 3), tf.float32)
    assert spec["fsl"] == tf.TensorSpec((None, 2), tf.float64)
    assert isinstance(spec["rag"], tf.RaggedTensorSpec)
    first = next(iter(data))
    assert tuple(first["v"].shape) == (4, 3)


@pytest.fixture
def mixed(sqlite_env: Catalog) -> dal.Dataset:
    """Arrays of 3 values in one commit (row group), of 4 in the other (which file plans first depends on its
    random name)."""
    for width in (3, 4):
        rows = pa.array([[float(i)] * width for i in range(N)], pa.list_(pa.float32()))
        dal.write(pa.table({"id": pa.array(range(N)), "v": rows}), "t.mixed")
    return dal.open("t.mixed")


def test_a_later_length_is_a_clear_error_in_tf(mixed: dal.Dataset) -> None:
    pytest.importorskip("tensorflow")
    # the plan's first row group sets the spec; the other file's row group is named as the mismatch
    with pytest.raises(
        DalError, match=r"column 'v' of t\.mixed: its first row group holds arrays of [34] values.* other lengths"
    ):
        mixed.to_tf(batch_size=4)


def test_arrays_of_another_length_in_a_later_chunk_are_rows_in_torch(mixed: dal.Dataset) -> None:
    torch = pytest.importorskip("torch")
    batches = list(mixed.to_torch(batch_size=4))
    lengths = [len(r) for b in batches for r in b["v"]]
    assert sorted(lengths) == [3] * N + [4] * N
    assert all(isinstance(r, torch.Tensor) for b in batches for r in b["v"])


def test_ragged_arrays_in_tf(arrays: dal.Dataset) -> None:
    pytest.importorskip("tensorflow")
    got = [r.numpy().tolist() for b in arrays.select("rag").to_tf(batch_size=4) for r in b["rag"]]
    assert got == [[i] * (i % 3) for i in range(N)]
