"""Fixed-length numeric arrays (what dal.convert and Spark writes make of MLlib vectors) as tensors: one
(batch, n) tensor in to_torch, TensorSpec((None, n)) in to_tf; variable-length arrays as lists / ragged.

The adapters are issue 14's (H9): until they do this, these tests are strict xfails (an XPASS fails the run,
so the marks go once the adapters do it)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import dal
from catalog import Catalog

PENDING = pytest.mark.xfail(
    strict=True, reason="issue 14 (adapters): fixed-length array columns are not yet one (batch, n) tensor"
)
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


@PENDING
def test_fixed_length_arrays_are_one_2d_tensor_in_torch(arrays: dal.Dataset) -> None:
    torch = pytest.importorskip("torch")
    batch = next(iter(arrays.to_torch(batch_size=4)))
    assert isinstance(batch["v"], torch.Tensor) and tuple(batch["v"].shape) == (4, 3)
    assert batch["v"].dtype == torch.float32
    assert isinstance(batch["fsl"], torch.Tensor) and tuple(batch["fsl"].shape) == (4, 2)
    assert batch["fsl"].dtype == torch.float64
    np.testing.assert_array_equal(batch["v"][:, 0].numpy(), batch["id"].numpy().astype(np.float32))
    assert [len(r) for r in batch["rag"]] == [int(i) % 3 for i in batch["id"]]  # variable length: one per row


@PENDING
def test_fixed_length_arrays_have_a_2d_tensor_spec_in_tf(arrays: dal.Dataset) -> None:
    tf = pytest.importorskip("tensorflow")
    data = arrays.to_tf(batch_size=4)
    spec = data.element_spec
    assert spec["v"] == tf.TensorSpec((None, 3), tf.float32)
    assert spec["fsl"] == tf.TensorSpec((None, 2), tf.float64)
    assert isinstance(spec["rag"], tf.RaggedTensorSpec)
    first = next(iter(data))
    assert tuple(first["v"].shape) == (4, 3)
