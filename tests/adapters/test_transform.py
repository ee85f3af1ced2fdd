"""dal.TransformSpec (Petastorm's transform spec) through to_torch and to_tf: decoded input, declared output
checked on the first chunk, fixed shapes stacked. Expected values are computed with NumPy from the rows
written, not through dal."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import dal
from dal import ImageCodec, NdarrayCodec, ScalarCodec, TensorField, TensorSchema, TransformSpec
from dal.catalog import Catalog
from dal.errors import DalError
from dal.read.transform import OutField, TransformError

torch = pytest.importorskip("torch")
tf = pytest.importorskip("tensorflow")  # CI installs both (dal[torch,tf]); skipping fails the run there

N = 40
SCHEMA = TensorSchema("Frames", [
    TensorField("id", np.int64, (), ScalarCodec()),
    TensorField("label", np.str_, (), ScalarCodec()),
    TensorField("vec", np.float32, (8,), NdarrayCodec()),
    TensorField("img", np.uint8, (6, 8, 3), ImageCodec("png")),
    TensorField("pts", np.int16, (None, 2), NdarrayCodec()),
])  # fmt: skip


def _rows() -> list[dict[str, Any]]:
    rng = np.random.default_rng(7)
    return [
        {
            "id": i,
            "label": f"l{i % 3}",
            "vec": rng.normal(size=8).astype(np.float32),
            "img": rng.integers(0, 256, (6, 8, 3), dtype=np.uint8),
            "pts": np.full((i % 4 + 1, 2), i, np.int16),
        }
        for i in range(N)
    ]


@pytest.fixture
def frames(sqlite_env: Catalog) -> tuple[dal.Dataset, dict[int, dict[str, Any]]]:
    rows = _rows()
    dal.write(rows, "t.frames", format="petastorm", schema=SCHEMA)
    return dal.open("t.frames"), {r["id"]: r for r in rows}


def normalise(batch: dict[str, Any]) -> dict[str, Any]:
    """The numpy form: stacked, decoded tensor fields in, new and edited fields out."""
    assert batch["img"].shape[1:] == (6, 8, 3) and batch["img"].dtype == np.uint8  # decoded, not png bytes
    assert batch["vec"].shape[1:] == (8,) and batch["vec"].dtype == np.float32
    assert isinstance(batch["pts"], list)  # ragged: one array per row
    batch["img"] = batch["img"].astype(np.float32) / 255
    batch["norm"] = np.linalg.norm(batch["vec"], axis=1).astype(np.float64)
    batch["npts"] = np.array([len(p) for p in batch["pts"]], np.int64)
    batch["grid"] = batch["vec"].reshape(-1, 2, 4)
    return batch


SPEC = TransformSpec(
    normalise,
    edit_fields=[
        ("img", np.float32, (6, 8, 3), False),
        ("norm", np.float64, (), False),
        ("npts", np.int64, ()),
        ("grid", np.float32, (2, 4), False),
    ],
    removed_fields=["pts"],
)
OUT = ["id", "label", "vec", "img", "norm", "npts", "grid"]


def expected(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "label": row["label"],
        "vec": row["vec"],
        "img": row["img"].astype(np.float32) / 255,
        "norm": float(np.linalg.norm(row["vec"])),
        "npts": len(row["pts"]),
        "grid": row["vec"].reshape(2, 4),
    }


def _check_rows(columns: dict[str, Any], truth: dict[int, dict[str, Any]]) -> None:
    ids = [int(i) for i in columns["id"]]
    assert sorted(ids) == list(range(N))
    for k, i in enumerate(ids):
        want = expected(truth[i])
        assert columns["label"][k] == want["label"]
        np.testing.assert_array_equal(columns["vec"][k], want["vec"])
        np.testing.assert_allclose(columns["img"][k], want["img"], rtol=1e-6)
        np.testing.assert_allclose(columns["norm"][k], want["norm"], rtol=1e-6)
        assert int(columns["npts"][k]) == want["npts"]
        np.testing.assert_array_equal(columns["grid"][k], want["grid"])


def _torch_all(data: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    batches = list(data)
    cat: dict[str, Any] = {}
    for name in batches[0]:
        if isinstance(batches[0][name], torch.Tensor):
            cat[name] = torch.cat([b[name] for b in batches]).numpy()
        else:
            cat[name] = [v for b in batches for v in b[name]]
    return batches, cat


def _tf_all(data: Any) -> dict[str, Any]:
    batches = list(data)
    out = {n: np.concatenate([b[n].numpy() for b in batches]) for n in batches[0]}
    out["label"] = [s.decode() for s in out["label"]]
    return out


def test_spec_output_fields_follow_petastorm_transform_schema() -> None:
    inputs = [
        OutField("a", np.dtype(np.int64)),
        OutField("b", np.dtype(np.float32), (3,)),
        OutField("c", np.dtype("U")),
    ]
    spec = TransformSpec(
        _double_x, edit_fields=[("b", np.float64, (3,), True), ("d", np.uint8, (2, 2))], removed_fields=["c"]
    )
    out = spec.output_fields(inputs)
    # kept inputs in order, then the edited/added fields in edit_fields order (edited ones move to the end)
    assert [(f.name, str(f.dtype), f.shape, f.nullable) for f in out] == [
        ("a", "int64", (), False),
        ("b", "float64", (3,), True),
        ("d", "uint8", (2, 2), False),
    ]
    spec = TransformSpec(_double_x, edit_fields=[("d", np.str_, ())], selected_fields=["d", "a"])
    assert [f.name for f in spec.output_fields(inputs)] == ["d", "a"]  # selected_fields sets the order
    with pytest.raises(DalError, match="removed_fields or selected_fields, not both"):
        TransformSpec(None, removed_fields=["a"], selected_fields=["b"])
    with pytest.raises(DalError, match=r"removed_fields names columns the data does not have: \['zz'\]"):
        TransformSpec(None, removed_fields=["zz"]).output_fields(inputs)
    with pytest.raises(DalError, match=r"selected_fields names columns the transform does not produce: \['c'\]"):
        TransformSpec(None, selected_fields=["c"]).output_fields(inputs[:2])
    for bad, message in [
        ([("x", "no-such-dtype", ())], "not a NumPy dtype"),
        ([("x", np.float32, 3)], "shape must be a tuple"),
        ([("x", np.float32, (-1,))], "non-negative ints or None"),
        ([("x", np.str_, (2,))], r"scalars \(shape \(\)\)"),
        (["x"], "must be a tuple"),
        ([("x", np.int8, ()), ("x", np.int8, ())], "more than once: x"),
    ]:
        with pytest.raises(TransformError, match=message):
            TransformSpec(_double_x, edit_fields=bad)
    with pytest.raises(TransformError, match=r"edit_fields \['x'\] need a func"):
        TransformSpec(None, edit_fields=[("x", np.int8, ())])
    with pytest.raises(TransformError, match="callable"):
        TransformSpec(func=42)  # type: ignore[arg-type]
    with pytest.raises(TransformError, match="batch_format"):
        TransformSpec(None, batch_format="arrow")  # type: ignore[arg-type]


def test_torch_sees_decoded_petastorm_fields_and_gets_stacked_tensors(frames: Any) -> None:
    ds, truth = frames
    batches, cat = _torch_all(ds.to_torch(batch_size=16, transform=SPEC))
    first = batches[0]
    assert list(first) == OUT and [len(b["id"]) for b in batches] == [16, 16, 8]
    assert first["img"].dtype == torch.float32 and tuple(first["img"].shape) == (16, 6, 8, 3)
    assert tuple(first["grid"].shape) == (16, 2, 4) and first["norm"].dtype == torch.float64
    assert tuple(first["vec"].shape) == (16, 8) and first["npts"].dtype == torch.int64
    _check_rows(cat, truth)


def test_tf_takes_the_same_spec_with_the_declared_element_spec(frames: Any) -> None:
    ds, truth = frames
    data = ds.to_tf(batch_size=16, transform=SPEC)
    spec = data.element_spec
    assert list(spec) == OUT
    assert spec["img"] == tf.TensorSpec((None, 6, 8, 3), tf.float32)
    assert spec["grid"] == tf.TensorSpec((None, 2, 4), tf.float32)
    assert spec["vec"] == tf.TensorSpec((None, 8), tf.float32)
    assert spec["norm"] == tf.TensorSpec((None,), tf.float64) and spec["npts"] == tf.TensorSpec((None,), tf.int64)
    assert spec["label"] == tf.TensorSpec((None,), tf.string)
    _check_rows(_tf_all(data), truth)
    # a kept variable-shape field is ragged in TF, a list of tensors in torch
    keep = TransformSpec(None, selected_fields=["pts", "id"])
    ragged = ds.to_tf(batch_size=16, transform=keep)
    assert isinstance(ragged.element_spec["pts"], tf.RaggedTensorSpec)
    got = {int(i): p for b in ragged for i, p in zip(b["id"].numpy(), b["pts"].to_list(), strict=True)}
    assert all(np.array_equal(np.array(got[i], np.int16).reshape(-1, 2), truth[i]["pts"]) for i in range(N))
    batch = next(iter(ds.to_torch(batch_size=8, transform=keep)))
    assert list(batch) == ["pts", "id"] and isinstance(batch["pts"], list)
    assert all(
        torch.equal(p, torch.from_numpy(truth[int(i)]["pts"])) for p, i in zip(batch["pts"], batch["id"], strict=True)
    )


def petastorm_style(df: pd.DataFrame) -> pd.DataFrame:
    """A Petastorm make_batch_reader function, unchanged: a DataFrame with one array per tensor cell."""
    assert isinstance(df, pd.DataFrame) and isinstance(df["img"].iloc[0], np.ndarray)
    df["img"] = df["img"].map(lambda x: x.astype(np.float32) / 255)
    df["norm"] = df["vec"].map(lambda v: float(np.linalg.norm(v)))
    df["npts"] = df["pts"].map(len).astype(np.int64)
    df["grid"] = df["vec"].map(lambda v: v.reshape(2, 4))
    return df


def test_pandas_batch_format_ports_petastorm_functions(frames: Any) -> None:
    ds, truth = frames
    spec = TransformSpec(petastorm_style, SPEC.edit_fields, removed_fields=["pts"], batch_format="pandas")
    _batches, cat = _torch_all(ds.to_torch(batch_size=16, transform=spec))
    _check_rows(cat, truth)
    _check_rows(_tf_all(ds.to_tf(batch_size=16, transform=spec)), truth)


@pytest.mark.parametrize(
    ("change", "declared", "message"),
    [
        (lambda b: {**b, "norm": b["vec"][:, 0]}, ("norm", np.float64, ()), r"field 'norm': expected dtype float64, got float32"),
        (lambda b: {**b, "norm": b["vec"].astype(np.float64)}, ("norm", np.float64, ()), r"field 'norm': expected shape \(\) per row, got \(8,\)"),
        (lambda b: {**b, "norm": b["vec"].astype(np.float64)}, ("norm", np.float64, (4,)), r"field 'norm': expected shape \(4,\) per row, got \(8,\)"),
        (lambda b: b, ("norm", np.float64, ()), r"missing \['norm'\]"),
        (lambda b: {**b, "norm": b["id"] * 1.0, "oops": b["id"]}, ("norm", np.float64, ()), r"undeclared \['oops'\]"),
        (lambda b: {**b, "norm": (b["id"] * 1.0)[:3]}, ("norm", np.float64, ()), r"field 'norm': the transform returned 3 rows for a chunk of"),
        (lambda b: {**b, "vec": b["vec"].astype(np.float64), "norm": b["id"] * 1.0}, ("norm", np.float64, ()), r"field 'vec': expected dtype float32, got float64"),
        (lambda b: {**b, "norm": [None] * len(b["id"])}, ("norm", np.float64, ()), r"field 'norm', row 0: null in a field not declared nullable"),
    ],
)  # fmt: skip
def test_a_wrong_output_fails_on_the_first_chunk_naming_the_field(
    frames: Any, change: Any, declared: tuple[Any, ...], message: str
) -> None:
    ds, _truth = frames
    calls: list[int] = []

    def func(b: dict[str, Any]) -> dict[str, Any]:
        calls.append(len(b["id"]))
        return change(dict(b))

    spec = TransformSpec(func, edit_fields=[declared], removed_fields=["pts", "img"])
    with pytest.raises(TransformError, match=message):
        next(iter(ds.to_torch(batch_size=4, transform=spec)))
    assert len(calls) == 1  # the first chunk
    calls.clear()
    with pytest.raises(TransformError, match=message):
        ds.to_tf(batch_size=4, transform=spec)  # tried on the first rows when the dataset is made
    assert len(calls) == 1


def test_spec_errors_come_before_any_read(frames: Any) -> None:
    ds, _truth = frames
    with pytest.raises(TransformError, match=r"removed_fields names columns the data does not have: \['nope'\]"):
        ds.select("id").to_torch(8, transform=TransformSpec(lambda b: b, removed_fields=["nope"]))
    with pytest.raises(TransformError, match=r"selected_fields .*\['vec'\]"):
        ds.select("id").to_tf(8, transform=TransformSpec(None, selected_fields=["vec"]))
    with pytest.raises(TransformError, match="output_schema goes with a plain function"):
        ds.to_torch(8, transform=TransformSpec(None), output_schema=pa.schema([("id", pa.int64())]))
    with pytest.raises(TransformError, match="must be a dal.TransformSpec or a function"):
        ds.to_tf(8, transform="id * 2")
    with pytest.raises(DalError, match="must declare its output_schema"):
        ds.to_tf(8, transform=lambda b: b)


def test_plain_function_output_is_decoded(frames: Any) -> None:
    """transform=fn, output_schema=...: fn sees the stored Arrow chunk; a tensor field it passes on (same name
    and storage type) arrives decoded and stacked."""
    ds, truth = frames
    out_schema = pa.schema([("id", pa.int64()), ("img", pa.binary()), ("twice", pa.int64())])

    def fn(batch: pa.RecordBatch) -> pa.RecordBatch:
        assert batch.schema.field("img").type == pa.binary()  # as stored: png bytes
        ids = batch.column("id")
        return pa.record_batch([ids, batch.column("img"), pa.array(np.asarray(ids) * 2)], schema=out_schema)

    batch = next(iter(ds.to_torch(batch_size=8, transform=fn, output_schema=out_schema)))
    assert tuple(batch["img"].shape) == (8, 6, 8, 3) and batch["img"].dtype == torch.uint8
    for i, img in zip(batch["id"].tolist(), batch["img"], strict=True):
        np.testing.assert_array_equal(img.numpy(), truth[i]["img"])
    assert torch.equal(batch["twice"], batch["id"] * 2)
    data = ds.to_tf(batch_size=8, transform=fn, output_schema=out_schema)
    assert data.element_spec["img"] == tf.TensorSpec((None, 6, 8, 3), tf.uint8)
    first = next(iter(data))
    for i, img in zip(first["id"].numpy(), first["img"].numpy(), strict=True):
        np.testing.assert_array_equal(img, truth[int(i)]["img"])


@pytest.fixture
def delta(sqlite_env: Catalog) -> tuple[dal.Dataset, pa.Table]:
    rng = np.random.default_rng(3)
    arr = rng.normal(size=(N, 4)).astype(np.float32)
    table = pa.table(
        {
            "id": pa.array(range(N), pa.int64()),
            "x": pa.array(rng.normal(size=N)),
            "arr": pa.array(list(arr), pa.list_(pa.float32())),
            "name": pa.array([f"n{i}" for i in range(N)]),
        }
    )
    dal.write(table, "t.delta")
    return dal.open("t.delta"), table


def test_delta_arrays_stack_and_reshape_in_both_frameworks(delta: Any) -> None:
    ds, table = delta
    ref = table.to_pandas().set_index("id")
    arr = np.stack(ref["arr"].to_numpy())

    def func(b: dict[str, Any]) -> dict[str, Any]:
        assert b["arr"].shape[1:] == (4,)  # a fixed-length list column: one (rows, 4) array
        return {
            "id": b["id"],
            "arr": b["arr"],
            "mat": b["arr"].reshape(-1, 2, 2),
            "upper": np.char.upper(b["name"].astype(str)),
        }

    spec = TransformSpec(func, edit_fields=[("mat", np.float32, (2, 2), False), ("upper", np.str_, (), False)], selected_fields=["id", "arr", "mat", "upper"])  # fmt: skip
    _batches, cat = _torch_all(ds.shuffle(seed=2).to_torch(batch_size=16, transform=spec))
    ids = cat["id"]
    assert sorted(ids.tolist()) == list(range(N)) and cat["arr"].shape == (N, 4) and cat["mat"].shape == (N, 2, 2)
    np.testing.assert_array_equal(cat["arr"], arr[ids])
    np.testing.assert_array_equal(cat["mat"], arr[ids].reshape(-1, 2, 2))
    assert cat["upper"] == [f"N{i}" for i in ids]
    data = ds.to_tf(batch_size=16, transform=spec)
    assert data.element_spec["arr"] == tf.TensorSpec((None, 4), tf.float32)
    assert data.element_spec["mat"] == tf.TensorSpec((None, 2, 2), tf.float32)
    got = {n: np.concatenate([b[n].numpy() for b in data]) for n in ("id", "arr", "mat", "upper")}
    np.testing.assert_array_equal(got["mat"], arr[got["id"]].reshape(-1, 2, 2))
    assert [s.decode() for s in got["upper"]] == [f"N{i}" for i in got["id"]]


def test_spec_runs_in_dataloader_workers(delta: Any) -> None:
    ds, table = delta
    spec = TransformSpec(_double_x, edit_fields=[("x2", np.float64, ())], selected_fields=["id", "x2"])
    data = ds.to_torch(batch_size=8, transform=spec)
    loader = torch.utils.data.DataLoader(data, batch_size=None, num_workers=2)
    got = {int(i): float(v) for b in loader for i, v in zip(b["id"], b["x2"], strict=True)}
    x = table.column("x").to_numpy()
    assert got == {i: 2 * x[i] for i in range(N)}
    # data.loader: worker processes run the transform on whole chunks, the main process slices batches
    got = {int(i): float(v) for b in data.loader(num_workers=2) for i, v in zip(b["id"], b["x2"], strict=True)}
    assert got == {i: 2 * x[i] for i in range(N)}


def _double_x(b: dict[str, Any]) -> dict[str, Any]:
    return {**b, "x2": b["x"] * 2}


def test_converter_dataset_takes_a_spec(spark: Any, sqlite_env: Catalog) -> None:
    from pyspark.ml.linalg import Vectors

    rows = [(i, Vectors.dense([float(i), float(i) + 0.5, 1.0])) for i in range(12)]
    ds = dal.convert(spark.createDataFrame(rows, ["id", "features"]))
    spec = TransformSpec(
        lambda b: {**b, "sq": (b["features"] ** 2).sum(axis=1)},
        edit_fields=[("sq", np.float32, ())],
        removed_fields=["features"],
    )
    batches, cat = _torch_all(ds.to_torch(batch_size=5, transform=spec))
    assert list(batches[0]) == ["id", "sq"] and cat["sq"].dtype == np.float32
    f = np.array([[i, i + 0.5, 1.0] for i in cat["id"]], np.float32)
    np.testing.assert_allclose(cat["sq"], (f**2).sum(axis=1), rtol=1e-6)
    data = ds.to_tf(batch_size=5, transform=TransformSpec(None, selected_fields=["features"]))
    assert data.element_spec["features"] == tf.TensorSpec((None, 3), tf.float32)


def test_in_place_writes_and_a_missing_return_are_explained(delta: Any) -> None:
    ds, _table = delta

    def in_place(b: dict[str, Any]) -> dict[str, Any]:
        b["x"] *= 2  # a read-only view of the Arrow data
        return b

    def no_return(b: dict[str, Any]) -> None:
        b["x"] = b["x"] * 2

    with pytest.raises(TransformError, match=r"read-only input column .* make new arrays"):
        next(iter(ds.to_torch(8, transform=TransformSpec(in_place))))
    with pytest.raises(TransformError, match=r"not NoneType \(did it forget to return the batch\?\)"):
        ds.to_tf(8, transform=TransformSpec(no_return))


def test_schema_only_spec_skips_removed_columns(frames: Any) -> None:
    ds, truth = frames
    batch = next(iter(ds.to_torch(8, transform=TransformSpec(removed_fields=["img", "pts", "vec"]))))
    assert list(batch) == ["id", "label"] and batch["label"] == [truth[int(i)]["label"] for i in batch["id"]]
