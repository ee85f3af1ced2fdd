"""A pandas column of N-D NumPy arrays (issue 37): the obvious way to hold images in pandas.

pyarrow refuses it (``Can only convert 1-dimensional array values``); dal writes it as a fixed-shape tensor
column (the binary-cell path of ``dal.formats.logical``) and reads it back bit-exact. Ragged shapes, complex
numbers and objects Arrow has no type for are refused with one line naming the column and what to do.

The images are 8x8 uint8 digits in scikit-learn's ``load_digits`` range (0..16) when scikit-learn is not
installed (it is not in the dev group), the real ones when it is."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import dal
from dal.catalog import Catalog, DatasetNotFound
from dal.errors import DalError
from dal.formats.inputs import from_pandas


def _digits() -> tuple[np.ndarray, np.ndarray]:
    try:
        from sklearn.datasets import load_digits  # type: ignore[import-not-found]
    except ImportError:
        rng = np.random.default_rng(37)
        return rng.integers(0, 17, size=(1797, 8, 8), dtype=np.uint8), rng.integers(0, 10, 1797)
    digits = load_digits()
    return digits.images.astype(np.uint8), digits.target


@pytest.fixture
def digits(sqlite_env: Catalog) -> tuple[np.ndarray, np.ndarray]:
    images, labels = _digits()
    frame = pd.DataFrame({"id": np.arange(len(images)), "image": list(images), "label": labels})
    dal.write(frame, "digits")
    return images, labels


def _stacked(cells: object) -> np.ndarray:
    """Cells read back (whatever nesting a reader gives) as one (rows, 8, 8) array."""
    return np.stack([np.stack(list(c)) if c.dtype == object else c for c in cells])  # type: ignore[attr-defined]


def test_pyarrow_alone_refuses_the_column() -> None:
    """What users hit before: pyarrow's raw two-part error (dal now converts the column itself)."""
    frame = pd.DataFrame({"image": [np.zeros((8, 8), np.uint8)] * 2})
    with pytest.raises(pa.ArrowInvalid, match="1-dimensional"):
        pa.Table.from_pandas(frame, preserve_index=False)
    assert from_pandas(frame).column("image").type == pa.list_(pa.list_(pa.uint8(), 8), 8)


def test_images_round_trip_bit_exact_through_arrow_pandas_and_torch(digits: tuple[np.ndarray, np.ndarray]) -> None:
    images, labels = digits
    ds = dal.open("digits")
    assert {f.name: f.type for f in ds.version.schema.fields}["image"] == str(pa.list_(pa.list_(pa.uint8(), 8), 8))
    table = ds.to_arrow().sort_by("id")
    assert table.column("image").type == pa.list_(pa.list_(pa.uint8(), 8), 8)
    flat = table.column("image").combine_chunks().values.values.to_numpy()
    assert flat.dtype == np.uint8 and flat.tobytes() == images.tobytes()
    assert table.column("label").to_numpy().tolist() == labels.tolist()
    # pandas: each cell holds the image (an (8, 8) array: test_to_pandas_cells_are_2d_arrays), the same bytes
    frame = ds.to_pandas().sort_values("id")
    got = _stacked(frame["image"])
    assert got.dtype == np.uint8 and got.shape == images.shape and got.tobytes() == images.tobytes()
    pytest.importorskip("torch")
    batches = list(ds.scan().select("id", "image").to_torch(256))
    ids = np.concatenate([b["id"].numpy() for b in batches])
    tensor = np.concatenate([b["image"].numpy() for b in batches])[np.argsort(ids)]
    assert tensor.dtype == np.uint8 and tensor.shape == images.shape and tensor.tobytes() == images.tobytes()


def test_null_cells_stay_null_and_appends_keep_the_type(sqlite_env: Catalog) -> None:
    a, b = np.arange(12, dtype=np.float32).reshape(3, 4), np.ones((3, 4), np.float32)
    dal.write(pd.DataFrame({"id": [0, 1, 2], "t": [a, None, b]}), "nulls")
    dal.write(pd.DataFrame({"id": [3], "t": [a * 2]}), "nulls")
    out = dal.open("nulls").to_arrow().sort_by("id")
    assert out.column("t").type == pa.list_(pa.list_(pa.float32(), 4), 3)
    cells = out.column("t").to_pylist()
    assert cells[1] is None and np.array(cells[0], np.float32).tobytes() == a.tobytes()
    assert np.array(cells[3], np.float32).tobytes() == (a * 2).tobytes()


def test_one_d_arrays_stay_a_list_column() -> None:
    """Only N-D (N >= 2) arrays become tensors: 1-D arrays keep pyarrow's list conversion (lengths may vary)."""
    table = from_pandas(pd.DataFrame({"v": [np.arange(3), np.arange(5)]}))
    assert table.column("v").type == pa.list_(pa.int64())


@pytest.mark.parametrize(
    ("cells", "match"),
    [
        ([np.zeros((8, 8), np.uint8), np.zeros((8, 9), np.uint8)], r"'image'.*\(8, 9\) in row 1.*one shape"),
        ([np.zeros((8, 8), np.uint8), np.zeros((8, 8), np.float64)], r"'image'.*float64 \(8, 8\) in row 1"),
        ([np.zeros((8, 8), np.uint8), "a"], r"'image'.*a str in row 1"),
        ([np.zeros((2, 2), np.complex128)] * 2, r"'image' holds 2-D arrays of complex128.*integers or floats"),
        ([np.array([["a"]])] * 2, r"'image' holds 2-D arrays of <U1"),
        ([object(), object()], r"cannot store column image with type object: Could not convert.*give it numbers"),
    ],
)
def test_unstorable_columns_are_refused_in_one_line_before_writing(
    sqlite_env: Catalog, cells: list[object], match: str
) -> None:
    with pytest.raises(DalError, match=match) as raised:
        dal.write(pd.DataFrame({"id": range(len(cells)), "image": cells}), "bad")
    assert "\n" not in str(raised.value)
    assert not (Path(os.environ["DAL_WAREHOUSE"]) / "bad").exists()
    with pytest.raises(DatasetNotFound):
        dal.open("bad")


def test_a_complex_column_is_refused_naming_what_to_do(sqlite_env: Catalog) -> None:
    with pytest.raises(DalError, match=r"column 'z' holds complex numbers \(complex128\).*two float columns"):
        dal.write(pd.DataFrame({"z": np.array([1 + 2j, 3j])}), "bad")


# pandas 3 names its classes' module "pandas" (2.x: "pandas.core.frame"): dal took a pandas 3 DataFrame for
# something else (Petastorm writes refused it; Delta writes went through pyarrow's C stream, which refuses
# N-D cells; the progress line had no row count)
Pandas3Frame = type("DataFrame", (pd.DataFrame,), {"__module__": "pandas"})


def test_a_pandas_3_dataframe_is_a_dataframe(sqlite_env: Catalog) -> None:
    from dal import ScalarCodec, TensorField, TensorSchema
    from dal.progress import rows_of

    images = np.arange(2 * 4 * 4, dtype=np.uint8).reshape(2, 4, 4)
    frame = Pandas3Frame({"id": [0, 1], "image": list(images)})
    assert type(frame).__module__ == "pandas" and rows_of(frame) == 2
    dal.write(frame, "p3")
    flat = dal.open("p3").to_arrow().sort_by("id").column("image").combine_chunks().values.values.to_numpy()
    assert flat.tobytes() == images.tobytes()
    schema = TensorSchema("s", [TensorField("id", np.int64, (), ScalarCodec())])
    dal.write(Pandas3Frame({"id": [5, 6]}), "p3.pt", format="petastorm", schema=schema)
    assert sorted(dal.open("p3.pt").to_arrow().column("id").to_pylist()) == [5, 6]


def test_to_pandas_cells_are_2d_arrays(digits: tuple[np.ndarray, np.ndarray]) -> None:
    images, _ = digits
    frame = dal.open("digits").to_pandas().sort_values("id")
    cell = frame["image"].iloc[0]
    assert cell.dtype == np.uint8 and cell.shape == (8, 8) and cell.tobytes() == images[0].tobytes()
    scanned = dal.open("digits").scan().filter("id < 5").to_pandas().sort_values("id")  # a Scan's cells too
    cell = scanned["image"].iloc[0]
    assert cell.dtype == np.uint8 and cell.shape == (8, 8) and cell.tobytes() == images[0].tobytes()


def test_to_numpy_stacks_the_images(digits: tuple[np.ndarray, np.ndarray]) -> None:
    images, _ = digits
    got = dal.open("digits").to_numpy()
    order = np.argsort(got["id"])
    assert got["image"].dtype == np.uint8 and got["image"].shape == images.shape
    assert got["image"][order].tobytes() == images.tobytes()


def test_iter_numpy_batches_are_image_stacks(digits: tuple[np.ndarray, np.ndarray]) -> None:
    images, _ = digits
    batch = next(iter(dal.open("digits").iter_numpy(100)))
    assert batch["image"].dtype == np.uint8 and batch["image"].shape == (100, 8, 8)
    assert batch["image"].tobytes() == images[batch["id"]].tobytes()


def test_scan_to_numpy_stacks_the_images(digits: tuple[np.ndarray, np.ndarray]) -> None:
    images, _ = digits
    got = dal.open("digits").scan().filter("id < 10").select("id", "image").to_numpy()
    assert got["image"].dtype == np.uint8 and got["image"].shape == (10, 8, 8)
    assert got["image"].tobytes() == images[got["id"]].tobytes()


def test_an_embedding_reads_as_a_matrix_on_every_numpy_path(sqlite_env: Catalog) -> None:
    """A 1-D fixed-size list (Delta ``FixedSizeList<float32>[8]``) is a (rows, 8) array, not rows of lists."""
    vectors = np.arange(30 * 8, dtype=np.float32).reshape(30, 8) / 3
    embedding = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 8)
    dal.write(pa.table({"id": pa.array(range(30), pa.int64()), "embedding": embedding}), "emb")
    ds = dal.open("emb")
    whole = ds.to_numpy()
    assert whole["embedding"].dtype == np.float32 and whole["embedding"].shape == (30, 8)
    assert whole["embedding"].tobytes() == vectors[whole["id"]].tobytes()
    batches = list(ds.iter_numpy(7))
    assert [b["embedding"].shape for b in batches] == [(7, 8)] * 4 + [(2, 8)]
    assert all(b["embedding"].tobytes() == vectors[b["id"]].tobytes() for b in batches)
    cell = ds.to_pandas().sort_values("id")["embedding"].iloc[3]
    assert cell.dtype == np.float32 and cell.shape == (8,) and cell.tobytes() == vectors[3].tobytes()


def test_null_cells_read_as_one_array_per_row(sqlite_env: Catalog) -> None:
    """With a null cell there is no (rows, *shape) array without inventing values: an object array of (3, 4)
    arrays, None for the null cell (to_numpy, iter_numpy and pandas alike)."""
    a, b = np.arange(12, dtype=np.float32).reshape(3, 4), np.ones((3, 4), np.float32)
    dal.write(pd.DataFrame({"id": [0, 1, 2], "t": [a, None, b]}), "nulls")
    ds = dal.open("nulls")
    got = ds.to_numpy()
    cells = dict(zip(got["id"].tolist(), got["t"], strict=True))
    assert got["t"].dtype == object and got["t"].shape == (3,) and cells[1] is None
    assert cells[0].dtype == np.float32 and cells[0].shape == (3, 4) and cells[0].tobytes() == a.tobytes()
    assert cells[2].tobytes() == b.tobytes()
    assert next(iter(ds.iter_numpy(10)))["t"].dtype == object
    frame = ds.to_pandas().sort_values("id")
    assert frame["t"].iloc[1] is None and frame["t"].iloc[0].shape == (3, 4)


@pytest.mark.slow
def test_ray_batches_are_image_stacks(digits: tuple[np.ndarray, np.ndarray]) -> None:
    ray = pytest.importorskip("ray")
    images, _ = digits
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        batch = next(iter(dal.open("digits").to_ray().iter_batches(batch_size=100, batch_format="numpy")))
    finally:
        ray.shutdown()
    assert batch["image"].dtype == np.uint8 and batch["image"].shape == (100, 8, 8)
    assert batch["image"].tobytes() == images[batch["id"]].tobytes()
