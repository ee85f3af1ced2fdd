"""The TensorFlow adapter: element_spec from the schema, sharding, epochs, and Keras model.fit."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
tf = pytest.importorskip("tensorflow")  # CI installs it (dal[tf]); skipping fails the run there

import dal  # noqa: E402
from dal import CompressedNdarrayCodec, ImageCodec, NdarrayCodec, ScalarCodec, TensorField, TensorSchema  # noqa: E402
from dal.catalog import Catalog  # noqa: E402


@pytest.fixture
def frames(sqlite_env: Catalog) -> dal.Dataset:
    schema = TensorSchema("F", [
        TensorField("id", np.int64, (), ScalarCodec()),
        TensorField("camera", np.str_, (), ScalarCodec()),
        TensorField("depth", np.float32, (4, 4), NdarrayCodec()),
        TensorField("rgb", np.uint8, (6, 8, 3), ImageCodec("png")),
        TensorField("points", np.int16, (None, 2), CompressedNdarrayCodec()),
    ])  # fmt: skip
    rows = [
        {"id": i, "camera": f"c{i % 2}", "depth": np.full((4, 4), i, np.float32), "rgb": np.full((6, 8, 3), i, np.uint8),
         "points": np.zeros((i % 3 + 1, 2), np.int16)}
        for i in range(50)
    ]  # fmt: skip
    dal.write(rows, "tf.frames", format="petastorm", schema=schema)
    return dal.open("tf.frames")


def test_element_spec_keeps_shapes_and_dtypes(frames: dal.Dataset) -> None:
    data = frames.select("id", "camera", "depth", "rgb").to_tf(batch_size=16)
    spec = data.element_spec
    assert spec["depth"].shape.as_list() == [None, 4, 4] and spec["depth"].dtype == tf.float32
    assert spec["rgb"].shape.as_list() == [None, 6, 8, 3] and spec["rgb"].dtype == tf.uint8
    assert spec["id"].dtype == tf.int64 and spec["camera"].dtype == tf.string
    batches = list(data)
    assert [int(b["id"].shape[0]) for b in batches] == [16, 16, 16, 2]
    ids = np.concatenate([b["id"].numpy() for b in batches])
    first = batches[0]
    i = int(first["id"][0])
    assert np.array_equal(first["rgb"][0].numpy(), np.full((6, 8, 3), i, np.uint8))
    assert sorted(ids) == list(range(50)) and first["camera"][0].numpy().decode() == f"c{i % 2}"


def test_variable_shapes_are_ragged_tensors(frames: dal.Dataset) -> None:
    data = frames.select("id", "points").to_tf(batch_size=16)
    spec = data.element_spec["points"]
    assert isinstance(spec, tf.RaggedTensorSpec) and spec.shape.as_list() == [None, None, 2]
    assert spec.dtype == tf.int16
    batches = list(data)
    assert [int(b["id"].shape[0]) for b in batches] == [16, 16, 16, 2]
    for b in batches:
        points = b["points"]
        assert isinstance(points, tf.RaggedTensor) and points.shape[0] == b["id"].shape[0]
        for i, p in zip(b["id"].numpy(), points, strict=True):
            assert p.shape.as_list() == [i % 3 + 1, 2]  # each row its own length


def test_shards_and_epochs(frames: dal.Dataset) -> None:
    seen = []
    for rank in range(3):
        data = frames.select("id").shard(rank, 3, "keep").to_tf(batch_size=8)
        seen += [int(x) for b in data for x in b["id"]]
    assert sorted(seen) == list(range(50))
    shuffled = frames.select("id").shuffle(seed=2, buffer_size=10).to_tf(batch_size=50)
    first, second = (np.concatenate([b["id"].numpy() for b in shuffled]) for _ in range(2))
    assert sorted(first) == sorted(second) == list(range(50)) and list(first) != list(second)  # a new epoch per pass


def test_keras_model_fit(frames: dal.Dataset) -> None:
    scaled = frames.select("depth", "id").to_tf(batch_size=10)
    data = scaled.map(lambda d: (d["depth"] / 50.0, tf.cast(d["id"] % 2, tf.float32)))
    model = tf.keras.Sequential([tf.keras.Input((4, 4)), tf.keras.layers.Flatten(), tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss="mse")
    history = model.fit(data, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2 and all(np.isfinite(history.history["loss"]))


def test_arrow_only_columns(frames: dal.Dataset, tmp_path: Path) -> None:
    dal.write(pa.table({"t": pa.array([1, 2], pa.timestamp("us", tz="UTC")), "ok": [True, False]}), "tf.plain")
    (batch,) = list(dal.open("tf.plain").to_tf(batch_size=4))
    assert batch["t"].dtype == tf.int64 and list(batch["t"].numpy()) == [1, 2] and batch["ok"].dtype == tf.bool
