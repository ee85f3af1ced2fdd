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


def test_keras_fit_knows_its_steps_and_never_runs_out_of_data(frames: dal.Dataset) -> None:
    """The dataset has its cardinality (the plan's rows in batches), so Keras does not run into the end of the data
    each epoch with "Your input ran out of data" (a warning of every epoch before)."""
    import logging
    import warnings

    data = frames.select("depth", "id").to_tf(batch_size=10)
    assert int(data.cardinality()) == len(list(data)) == 5
    pairs = data.map(lambda d: (d["depth"] / 50.0, tf.cast(d["id"] % 2, tf.float32)))
    model = tf.keras.Sequential([tf.keras.Input((4, 4)), tf.keras.layers.Flatten(), tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.01), loss="mse")
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger().addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            history = model.fit(pairs, epochs=2, verbose=0)
    finally:
        logging.getLogger().removeHandler(handler)
    said = [str(w.message) for w in caught] + [r.getMessage() for r in records]
    assert not [m for m in said if "ran out of data" in m], said
    assert len(history.history["loss"]) == 2


def test_cardinality_is_exact_where_every_epoch_has_the_same_rows(frames: dal.Dataset) -> None:
    from dal import TransformSpec

    def cardinality(data: object) -> int:
        return int(data.cardinality())  # type: ignore[attr-defined]

    def batches(data: object) -> int:
        return sum(1 for _ in data)  # type: ignore[attr-defined]

    exact = [
        frames.select("id").to_tf(batch_size=16),  # 50 rows: 16, 16, 16, 2
        frames.select("id").to_tf(batch_size=50),
        frames.select("id").to_tf(batch_size=64),
        frames.select("id").filter("id >= 13").to_tf(batch_size=8),  # counted: 37 rows
        frames.select("id").filter("id > 99").to_tf(batch_size=8),  # no rows, no batches
        frames.select("id").shard(1, 3, "keep").to_tf(batch_size=4),
        frames.select("id").shard(2, 3, "drop").to_tf(batch_size=4),
        frames.select("id").shuffle(seed=1, buffer_size=10).to_tf(batch_size=7),
        frames.select("id", "depth").to_tf(batch_size=16, transform=TransformSpec(None, selected_fields=["id"])),
    ]
    assert [cardinality(d) for d in exact[:5]] + [cardinality(d) for d in exact[-2:]] == [4, 1, 1, 5, 0, 8, 4]
    for d in exact:
        assert batches(d) == batches(d) == cardinality(d)  # two passes (epochs), each that many batches
    ranks = [frames.select("id").shard(r, 3, "keep").to_tf(batch_size=4) for r in range(3)]
    rows = [sum(int(b["id"].shape[0]) for b in d) for d in ranks]  # type: ignore[attr-defined]
    assert sum(rows) == 50 and [cardinality(d) for d in ranks] == [-(-n // 4) for n in rows]
    # a sample's size differs between epochs; a plain function may return other rows: unknown, not wrong
    sampled = frames.select("id").sample(0.5, seed=3).to_tf(batch_size=4)
    halved = frames.select("id").to_tf(
        batch_size=4, transform=lambda b: b.slice(0, b.num_rows // 2), output_schema=pa.schema([("id", pa.int64())])
    )
    assert cardinality(sampled) == cardinality(halved) == int(tf.data.UNKNOWN_CARDINALITY)
    assert batches(halved) == 7  # 25 rows


def test_arrow_only_columns(frames: dal.Dataset, tmp_path: Path) -> None:
    dal.write(pa.table({"t": pa.array([1, 2], pa.timestamp("us", tz="UTC")), "ok": [True, False]}), "tf.plain")
    (batch,) = list(dal.open("tf.plain").to_tf(batch_size=4))
    assert batch["t"].dtype == tf.int64 and list(batch["t"].numpy()) == [1, 2] and batch["ok"].dtype == tf.bool
