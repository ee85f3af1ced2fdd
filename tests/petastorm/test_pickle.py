"""The pickled Unischema: written as petastorm would, read with a restricted unpickler that runs nothing."""

from __future__ import annotations

import os
import pickle
import pickletools
from pathlib import Path

import numpy as np
import pytest

from dal import CompressedNdarrayCodec, ImageCodec, NdarrayCodec, ScalarCodec, TensorField, TensorSchema
from dal.errors import FormatError, SchemaMismatch
from dal.formats.petastorm_pickle import dumps_unischema, loads_unischema

SCHEMA = TensorSchema("Example", [
    TensorField("id", np.int64, (), ScalarCodec()),
    TensorField("name", np.str_, (), ScalarCodec(), nullable=True),
    TensorField("m", np.float32, (2, None), NdarrayCodec()),
    TensorField("c", np.int16, (4,), CompressedNdarrayCodec()),
    TensorField("img", np.uint8, (8, 8, 3), ImageCodec("jpeg", 85)),
])  # fmt: skip


def test_round_trip_and_the_classes_named() -> None:
    blob = dumps_unischema(SCHEMA)
    assert loads_unischema(blob) == SCHEMA
    names = {arg for op, arg, _ in pickletools.genops(blob) if op.name == "GLOBAL"}
    assert {"petastorm.unischema Unischema", "petastorm.unischema UnischemaField", "petastorm.codecs ScalarCodec",
            "petastorm.codecs CompressedImageCodec", "pyspark.sql.types LongType", "numpy float32",
            "collections OrderedDict"} <= names  # fmt: skip


class _Evil:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.path}",))


def test_a_malicious_pickle_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_Evil(str(marker)))
    with pytest.raises(FormatError, match="refusing to load posix.system|refusing to load os.system"):
        loads_unischema(payload)
    assert not marker.exists()
    # hidden inside an otherwise valid schema, too
    inner = dumps_unischema(SCHEMA).replace(b"cpetastorm.codecs\nNdarrayCodec\n", b"cos\nsystem\n")
    with pytest.raises(FormatError, match="refusing to load os.system"):
        loads_unischema(inner)
    assert not marker.exists()


def test_other_objects_are_refused() -> None:
    with pytest.raises(FormatError, match="builtins.eval"):
        loads_unischema(b"cbuiltins\neval\n(X\x04\x00\x00\x001+1tR.")
    with pytest.raises(FormatError, match="not a Unischema"):
        loads_unischema(pickle.dumps({"a": 1}))
    with pytest.raises(FormatError):
        loads_unischema(b"not a pickle")


def test_names_must_be_identifiers() -> None:
    with pytest.raises(SchemaMismatch, match="identifiers"):
        TensorSchema("my.schema", [TensorField("a", np.int32)])
    with pytest.raises(SchemaMismatch, match="identifiers"):
        TensorSchema("S", [TensorField("a-b", np.int32)])
    with pytest.raises(SchemaMismatch, match="needs a codec"):
        TensorField("m", np.float32, (2, 2))
    with pytest.raises(SchemaMismatch, match="duplicate"):
        TensorSchema("S", [TensorField("a", np.int32), TensorField("a", np.int64)])
