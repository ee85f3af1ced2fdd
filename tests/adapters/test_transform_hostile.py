"""Adversarial TransformSpec probes: hostile arguments are TransformErrors at construction, and to_torch and
to_tf with the same spec on the same data both equal a NumPy reference computed from the rows written
(timestamps of any declared unit, bytes that are not UTF-8, strings, selected_fields order); nulls that a
TensorFlow tensor cannot hold are DalErrors naming the column, never b"None" or INT64_MIN."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import dal
from dal import TransformSpec
from dal.catalog import Catalog
from dal.errors import DalError
from dal.read.transform import TransformError

torch = pytest.importorskip("torch")
tf = pytest.importorskip("tensorflow")  # CI installs both (dal[torch,tf])

N = 37
BASE = np.datetime64("2026-01-01T00:00:00", "s")


def _table() -> pa.Table:
    i = np.arange(N)
    return pa.table({
        "id": pa.array(i, pa.int64()),
        "x": pa.array(i * 0.5, pa.float32()),
        "s": [f"s{k}" for k in i],
        "ts": pa.array((BASE + i * 3600).astype("datetime64[us]")),
        "vec": pa.array([[float(k), float(-k)] for k in i], pa.list_(pa.float64(), 2)),
    })  # fmt: skip


@pytest.fixture
def data(sqlite_env: Catalog) -> dal.Dataset:
    dal.write(_table(), "probe.t")
    return dal.open("probe.t")


def prepare(b: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": b["id"],
        "when": b["ts"].astype("datetime64[ns]") + np.timedelta64(1, "ms"),  # a declared unit other than us
        "blob": np.array([bytes([0xFF, int(k) % 256, 0x00]) for k in b["id"]], dtype=object),  # not UTF-8
        "label": np.array([f"é{k}" for k in b["id"]], dtype=object),
        "sq": (b["vec"] ** 2).astype(np.float32),
        "flag": b["x"] > 3,
    }


SPEC = TransformSpec(
    prepare,
    edit_fields=[
        ("when", "datetime64[ns]", ()),
        ("blob", np.bytes_, ()),
        ("label", np.str_, ()),
        ("sq", np.float32, (2,)),
        ("flag", np.bool_, ()),
    ],
    selected_fields=["sq", "id", "when", "blob", "label", "flag"],
)


def reference() -> dict[str, Any]:
    """What every framework must hand on, computed with NumPy from the table written (not through dal)."""
    t = _table()
    ids = t.column("id").to_numpy()
    ts = t.column("ts").to_numpy().astype("datetime64[us]")
    vec = np.array(t.column("vec").to_pylist())
    return {
        "sq": (vec**2).astype(np.float32),
        "id": ids,
        "when": (ts + np.timedelta64(1, "ms")).astype(np.int64),  # microseconds since the epoch
        "blob": [bytes([0xFF, int(k) % 256, 0x00]) for k in ids],
        "label": [f"é{k}" for k in ids],
        "flag": t.column("x").to_numpy() > 3,
    }


def test_torch_and_tf_agree_with_numpy_under_one_spec(data: dal.Dataset) -> None:
    ref = reference()
    batches = list(data.to_torch(batch_size=8, transform=SPEC))
    assert list(batches[0]) == list(ref)  # selected_fields order
    got_torch = {
        k: (np.concatenate([b[k].numpy() for b in batches]) if isinstance(batches[0][k], torch.Tensor)
            else [v for b in batches for v in b[k]])
        for k in ref
    }  # fmt: skip
    elements = list(data.to_tf(8, transform=SPEC))
    assert list(elements[0]) == list(ref)
    got_tf = {k: np.concatenate([e[k].numpy() for e in elements]) for k in ref}
    got_tf["label"] = [v.decode() for v in got_tf["label"]]
    got_tf["blob"] = list(got_tf["blob"])
    for name, want in ref.items():
        for got in (got_torch, got_tf):
            if isinstance(want, list):
                assert list(got[name]) == want, name
            else:
                np.testing.assert_array_equal(got[name], want, err_msg=name)
                assert np.asarray(got[name]).dtype == want.dtype, name


def test_tf_dates_stay_days_through_a_spec(sqlite_env: Catalog) -> None:
    days = np.arange(5).astype("datetime64[D]")
    dal.write(pa.table({"d": pa.array(days)}), "probe.d")
    ds = dal.open("probe.d")
    plain = np.concatenate([e["d"].numpy() for e in ds.to_tf(2)])
    spec = np.concatenate([e["d"].numpy() for e in ds.to_tf(2, transform=TransformSpec(None))])
    np.testing.assert_array_equal(plain, days.astype(np.int64))
    np.testing.assert_array_equal(spec, days.astype(np.int64))


@pytest.mark.parametrize("column", ["s", "i", "t"])
@pytest.mark.parametrize("with_spec", [False, True])
def test_tf_refuses_nulls_it_cannot_hold(sqlite_env: Catalog, column: str, with_spec: bool) -> None:
    dal.write(pa.table({
        "s": ["a", None, "c"],
        "i": pa.array([1, None, 3], pa.int64()),
        "t": pa.array([BASE.astype("datetime64[us]"), None, BASE.astype("datetime64[us]")], pa.timestamp("us")),
    }), "probe.n")  # fmt: skip
    scan = dal.open("probe.n").select(column)
    message = f"column '{column}' of probe.n holds nulls, which a TensorFlow tensor cannot"
    with pytest.raises(DalError, match=message):  # refused where the dataset is made (footer statistics),
        scan.to_tf(3, transform=TransformSpec(None)) if with_spec else scan.to_tf(3)  # not in tf.data's generator
    # the same rows without their nulls read fine
    clean = dal.open("probe.n").filter(f"{column} IS NOT NULL").select(column)
    assert sum(int(e[column].shape[0]) for e in clean.to_tf(3)) == 2


def _ident(b: Any) -> Any:
    return b


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"selected_fields": ["id", "x", "id"]}, "selected_fields names a field more than once: id"),
        ({"func": _ident, "edit_fields": [("y", None, ())]}, "dtype is missing"),
        ({"func": _ident, "edit_fields": [("y", np.float32, (), "no")]}, "nullable must be True or False"),
        ({"func": _ident, "edit_fields": [("y", np.float32, (-1,))]}, "non-negative"),
        ({"func": _ident, "edit_fields": [("y", "float33", ())]}, "not a NumPy dtype"),
        ({"func": _ident, "edit_fields": [("y", np.float32, 3)]}, "shape must be a tuple"),
        ({"func": _ident, "edit_fields": [("y", "m8[s]", ())]}, "no tensor form"),
        ({"func": 3}, "callable"),
        ({"removed_fields": "id"}, "not a string"),
    ],
)
def test_hostile_spec_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(TransformError, match=message):
        TransformSpec(**kwargs)


def test_a_scalar_instead_of_a_column_says_so(data: dal.Dataset) -> None:
    spec = TransformSpec(lambda b: {**b, "y": np.float32(1)}, edit_fields=[("y", np.float32, ())])
    with pytest.raises(TransformError, match=r"field 'y': the transform returned one value \(float32\), not a column"):
        next(iter(data.to_torch(batch_size=8, transform=spec)))


def test_a_raising_function_propagates_its_own_error(data: dal.Dataset) -> None:
    def boom(b: Any) -> Any:
        raise KeyError("user bug")

    with pytest.raises(KeyError, match="user bug"):
        next(iter(data.to_torch(batch_size=8, transform=TransformSpec(boom))))
    with pytest.raises(KeyError, match="user bug"):
        data.to_tf(8, transform=TransformSpec(boom))


def test_pandas_and_numpy_batch_formats_hand_on_an_array_column_alike(data: dal.Dataset) -> None:
    """A numeric list column the function passes on: one (batch, n) tensor in both formats (it came back as a
    list of per-row tensors through a pandas DataFrame), equal to the rows written."""
    want = np.array(_table().column("vec").to_pylist())
    specs = [
        TransformSpec(lambda b: {**b, "y": b["x"] * 2}, edit_fields=[("y", np.float32, ())]),
        TransformSpec(lambda df: df.assign(y=df.x * 2), edit_fields=[("y", np.float32, ())], batch_format="pandas"),
    ]
    for spec in specs:
        batches = list(data.select("id", "x", "vec").to_torch(batch_size=8, transform=spec))
        assert all(isinstance(b["vec"], torch.Tensor) and b["vec"].shape[1:] == (2,) for b in batches)
        np.testing.assert_array_equal(np.concatenate([b["vec"].numpy() for b in batches]), want)


def _ragged_rows(b: dict[str, Any]) -> dict[str, Any]:
    return {**b, "r": [None if k % 3 == 0 else np.full((k % 4 + 1, 2), k, np.int16) for k in b["id"]]}


def test_a_null_in_a_ragged_field_is_an_empty_row_in_tf(data: dal.Dataset) -> None:
    """A nullable (None, 2) field: torch hands the None on, TF an empty row (it was a ValueError inside tf.data)."""
    spec = TransformSpec(_ragged_rows, edit_fields=[("r", np.int16, (None, 2), True)], selected_fields=["id", "r"])
    want = [None if k % 3 == 0 else np.full((k % 4 + 1, 2), k, np.int16) for k in range(N)]
    got_torch = [v for b in data.to_torch(batch_size=8, transform=spec) for v in b["r"]]
    got_tf = [row for e in data.to_tf(8, transform=spec) for row in e["r"].to_list()]
    assert len(got_torch) == len(got_tf) == N
    for k, w in enumerate(want):
        if w is None:
            assert got_torch[k] is None and got_tf[k] == []
        else:
            np.testing.assert_array_equal(got_torch[k].numpy(), w)
            np.testing.assert_array_equal(np.array(got_tf[k], np.int16), w)


def test_a_declared_none_dimension_is_a_list_in_every_chunk(data: dal.Dataset) -> None:
    """A field declared (None, 2) arrives as one tensor per row (README), also from a chunk whose rows happen to
    share a shape and that the function returned stacked; TF gets the same values ragged."""
    spec = TransformSpec(
        lambda b: {**b, "r": np.ones((len(b["id"]), 3, 2), np.int16) * b["id"][:, None, None].astype(np.int16)},
        edit_fields=[("r", np.int16, (None, 2))],
        selected_fields=["id", "r"],
    )
    batches = list(data.to_torch(batch_size=8, transform=spec))
    assert all(isinstance(b["r"], list) for b in batches)
    rows = [v.numpy() for b in batches for v in b["r"]]
    tf_rows = [np.array(r, np.int16) for e in data.to_tf(8, transform=spec) for r in e["r"].to_list()]
    for k in range(N):
        np.testing.assert_array_equal(rows[k], np.full((3, 2), k, np.int16))
        np.testing.assert_array_equal(tf_rows[k], np.full((3, 2), k, np.int16))
