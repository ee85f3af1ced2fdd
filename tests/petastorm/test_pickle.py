"""The pickled Unischema: written as petastorm would, read with a restricted unpickler that runs nothing."""

from __future__ import annotations

import os
import pickle
import pickletools
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dal import CompressedNdarrayCodec, ImageCodec, NdarrayCodec, ScalarCodec, TensorField, TensorSchema
from dal.errors import DalError, FormatError, SchemaMismatch
from dal.formats.petastorm.unischema import _load, dumps_unischema, loads_rowgroup_indexes, loads_unischema

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


# --- Python 2, protocol 0: how petastorm 0.4-0.7 pickled (copy_reg, __builtin__, pyspark's _restore) ---------


@dataclass(frozen=True)
class G:
    """A global, ``c<module>\\n<name>\\n``."""

    module: str
    name: str


@dataclass(frozen=True)
class R:
    """``func(*args)`` (REDUCE), then BUILD with ``state`` and SETITEMs with ``items`` when given."""

    func: object
    args: tuple[object, ...] = ()
    state: object = None
    items: tuple[tuple[object, object], ...] = ()


def p0(obj: object) -> bytes:
    """A protocol-0 pickle as Python 2 wrote it (str as STRING opcodes), of globals, calls and plain data."""
    if obj is None:
        return b"N"
    if obj is True or obj is False:
        return b"I01\n" if obj else b"I00\n"
    if isinstance(obj, int):
        return b"I%d\n" % obj
    if isinstance(obj, str):
        return b"S" + repr(obj).encode("latin1") + b"\n"
    if isinstance(obj, bytes):  # a Python 2 str holding bytes
        return b"S" + repr(obj)[1:].encode("ascii") + b"\n"
    if isinstance(obj, tuple):
        return b"(" + b"".join(p0(x) for x in obj) + b"t"
    if isinstance(obj, list):
        return b"(" + b"".join(p0(x) for x in obj) + b"l"
    if isinstance(obj, dict):
        return b"(d" + b"".join(p0(k) + p0(v) + b"s" for k, v in obj.items())
    if isinstance(obj, G):
        return b"c%s\n%s\n" % (obj.module.encode(), obj.name.encode())
    if isinstance(obj, R):
        out = p0(obj.func) + p0(tuple(obj.args)) + b"R"
        if obj.state is not None:
            out += p0(obj.state) + b"b"
        for k, v in obj.items:
            out += p0(k) + p0(v) + b"s"
        return out
    raise TypeError(obj)


def whole(obj: object) -> bytes:
    return p0(obj) + b"."


RECON, OBJECT = G("copy_reg", "_reconstructor"), G("__builtin__", "object")
NAMES = ("name", "numpy_dtype", "shape", "codec", "nullable")


def instance(module: str, name: str, state: object = None) -> R:
    return R(RECON, (G(module, name), OBJECT, None), state)


def legacy_field(name: str, dtype: object, shape: tuple[int | None, ...], codec: object, nullable: bool) -> R:
    return R(G("pyspark.serializers", "_restore"), ("UnischemaField", NAMES, (name, dtype, shape, codec, nullable)))


def scalar_codec(spark: str, **state: object) -> R:
    spark_type = instance("pyspark.sql.types", spark, state or None)
    return instance("petastorm.codecs", "ScalarCodec", {"_spark_type": spark_type})


def legacy_schema(**fields: R) -> bytes:
    """A Unischema as petastorm 0.4 pickled it under Python 2 (see legacy__0.4.0's _common_metadata)."""
    ordered = R(G("collections", "OrderedDict"), ([[k, v] for k, v in fields.items()],))
    return whole(instance("petastorm.unischema", "Unischema", {"_name": "TestSchema", "_fields": ordered, **fields}))


LEGACY_FIELDS = {
    "id": legacy_field("id", G("numpy", "int64"), (), scalar_codec("LongType"), False),
    "id2": legacy_field("id2", G("numpy", "int32"), (), scalar_codec("ShortType"), False),
    "decimal": legacy_field(
        "decimal", G("decimal", "Decimal"), (), scalar_codec("DecimalType", precision=10, scale=9), False
    ),
    "name": legacy_field("name", G("numpy", "unicode_"), (1,), instance("petastorm.codecs", "NdarrayCodec"), False),
    "blob": legacy_field("blob", G("numpy", "string_"), (None,), instance("petastorm.codecs", "NdarrayCodec"), True),
    "img": legacy_field(
        "img",
        G("numpy", "uint8"),
        (4, 2, 3),
        instance("petastorm.codecs", "CompressedImageCodec", {"_image_codec": ".png", "_quality": 80}),
        False,
    ),
}


def test_a_python2_protocol0_legacy_schema_loads() -> None:
    blob = legacy_schema(**LEGACY_FIELDS)
    assert {op.proto for op, _, _ in pickletools.genops(blob)} == {0}
    schema = loads_unischema(blob)
    got = {f.name: (f.dtype_name, f.shape, f.codec, f.nullable) for f in schema}
    assert got == {
        "id": ("int64", (), ScalarCodec(), False),
        "id2": ("int32", (), ScalarCodec("int16"), False),  # a ShortType column: int16 on disk
        "decimal": ("decimal", (), ScalarCodec("decimal128(10, 9)"), False),
        "name": ("str", (1,), NdarrayCodec(), False),
        "blob": ("bytes", (None,), NdarrayCodec(), True),
        "img": ("uint8", (4, 2, 3), ImageCodec("png", 80), False),
    }
    # petastorm 0.7.6 (Python 2) pickled the namedtuple through copy_reg with tuple as its base
    as_tuple = R(
        RECON,
        (
            G("petastorm.unischema", "UnischemaField"),
            G("__builtin__", "tuple"),
            ("id", G("numpy", "int64"), (), None, True),
        ),
    )
    (field,) = loads_unischema(legacy_schema(id=as_tuple)).fields
    assert (field.name, field.dtype_name, field.nullable, field.codec) == ("id", "int64", True, ScalarCodec())


def test_numpy_1_and_2_and_python_names_of_dtypes() -> None:
    from decimal import Decimal

    for global_, expected in (
        (G("numpy", "string_"), "bytes"), (G("numpy", "unicode_"), "str"), (G("numpy", "bool"), "bool"),
        (G("numpy", "bool_"), "bool"), (G("numpy", "str_"), "str"), (G("numpy", "bytes_"), "bytes"),
        (G("numpy", "datetime64"), "datetime64"), (G("decimal", "Decimal"), "decimal"),
        (G("__builtin__", "unicode"), "str"), (G("builtins", "float"), "float64"),
        (G("numpy", "float16"), "float16"), (G("numpy", "uint64"), "uint64"),
    ):  # fmt: skip
        (field,) = loads_unischema(legacy_schema(x=legacy_field("x", global_, (), None, False))).fields
        assert field.dtype_name == expected, global_
    # Python 3 pickles of the live numpy types (numpy 2 names them numpy.bool, numpy.str_ ...)
    for t in (np.bool_, np.str_, np.bytes_, np.datetime64, np.float32, np.int8, np.uint32, Decimal):
        for protocol in (0, 2, 4, 5):
            g = pickle.dumps(t, protocol=protocol)
            assert _load(g, "test").value is t or _load(g, "test").value is np.dtype(t).type, (t, protocol)


def test_rowgroup_indexes_python2_and_numpy2_scalars() -> None:
    def scalar(core: str, spec: str, data: bytes) -> R:
        dtype = R(G("numpy", "dtype"), (spec, 0, 1), (3, "<", None, None, None, -1, -1, 0))
        return R(G(core, "scalar"), (dtype, data))

    index = R(
        G("collections", "defaultdict"),
        (G("__builtin__", "set"),),
        items=(
            (scalar("numpy.core.multiarray", "i8", (7).to_bytes(8, "little")), R(G("__builtin__", "set"), ([0, 3],))),
            (
                scalar("numpy._core.multiarray", "i8", (-2).to_bytes(8, "little", signed=True)),
                R(G("__builtin__", "set"), ([1],)),
            ),
        ),
    )
    indexer = instance(
        "petastorm.etl.rowgroup_indexers",
        "SingleFieldIndexer",
        {"_index_name": "id", "_column_name": "id", "_index_data": index},
    )
    (got,) = loads_rowgroup_indexes(whole({"id": indexer})).values()
    assert (got.name, got.column, got.kind) == ("id", "id", "SingleFieldIndexer")
    assert dict(got.pieces) == {7: frozenset({0, 3}), -2: frozenset({1})}


@pytest.mark.parametrize(
    ("payload", "refusal"),
    [
        # the classic: copy_reg._reconstructor handed os.system as the class
        (R(RECON, (G("os", "system"), OBJECT, "touch {marker}")), "refusing to load os.system"),
        (R(RECON, (G("posix", "system"), OBJECT, None)), "refusing to load posix.system"),
        (R(RECON, (G("subprocess", "Popen"), OBJECT, None)), "refusing to load subprocess.Popen"),
        # allowed globals combined to call something: the reconstructor only builds stand-ins from object
        (R(RECON, (G("numpy", "float32"), OBJECT, None)), "only allowed for petastorm schema classes"),
        (R(RECON, (G("petastorm.unischema", "Unischema"), OBJECT, "touch {marker}")), "only allowed for petastorm"),
        (R(RECON, (G("petastorm.unischema", "Unischema"), G("numpy", "dtype"), None)), "only allowed for petastorm"),
        (
            R(G("__builtin__", "eval"), ("__import__('os').system('touch {marker}')",)),
            "refusing to load __builtin__.eval",
        ),
        (R(G("__builtin__", "getattr"), (G("os", "path"), "join")), "refusing to load __builtin__.getattr"),
        (R(G("__builtin__", "__import__"), ("os",)), "refusing to load __builtin__.__import__"),
        # pyspark's namedtuple restore with a hostile callable inside, or naming another class
        (
            R(
                G("pyspark.serializers", "_restore"),
                ("UnischemaField", NAMES, ("x", G("os", "system"), (), None, False)),
            ),
            "refusing to load os.system",
        ),
        (
            R(G("pyspark.serializers", "_restore"), ("Popen", ("args",), ("touch {marker}",))),
            "only allowed for petastorm's UnischemaField",
        ),
        (
            R(G("pyspark.serializers", "_restore"), ("UnischemaField", ("evil",), ("touch {marker}",))),
            "only allowed for petastorm's UnischemaField",
        ),
        (
            R(G("pyspark.serializers", "_create_namedtuple_class"), ("x", ("a",))),
            "refusing to load pyspark.serializers",
        ),
        # a REDUCE on a numpy global that is not a dtype constructor
        (R(G("numpy", "float32"), ("1",)), "refusing to call numpy.float32"),
        (R(G("numpy", "object_"), ("touch {marker}",)), "refusing to call numpy.object_"),
        (R(G("numpy", "dtype"), ("O", 0, 1)), "refusing dtype 'O'"),
        (R(G("numpy", "dtype"), ("i8,O", 0, 1)), "refusing dtype"),
        (R(G("numpy.core.multiarray", "scalar"), (G("numpy", "object_"), "x")), "must be a plain numpy.dtype"),
        (
            R(G("numpy.core.multiarray", "_reconstruct"), (G("numpy", "ndarray"), (0,), "b")),
            "refusing to load numpy.core.multiarray._reconstruct",
        ),
        (R(G("numpy", "load"), ("/etc/passwd",)), "refusing to load numpy.load"),
        (R(G("collections", "defaultdict"), (G("os", "system"),)), "refusing to load os.system"),
        (R(G("collections", "defaultdict"), (RECON,)), "only a set factory"),
        (R(G("_codecs", "encode"), ("x", "rot13")), "only latin-1"),
        (R(G("decimal", "Decimal"), ("1",)), "refusing to call decimal.Decimal"),
        (R(G("pyspark.sql.types", "StringType"), ("touch {marker}",)), "with arguments"),
    ],
)
def test_payloads_disguised_in_legacy_pickles_run_nothing(tmp_path: Path, payload: R, refusal: str) -> None:
    marker = tmp_path / "pwned"

    def fill(obj: object) -> object:
        if isinstance(obj, str):
            return obj.replace("{marker}", str(marker))
        if isinstance(obj, tuple):
            return tuple(fill(x) for x in obj)
        if isinstance(obj, R):
            return R(fill(obj.func), fill(obj.args), fill(obj.state), obj.items)  # type: ignore[arg-type]
        return obj

    hostile = fill(payload)
    # alone, as a field's codec, as a field's dtype, and as the Unischema's state
    for blob in (
        whole(hostile),
        legacy_schema(**LEGACY_FIELDS, evil=legacy_field("evil", G("numpy", "int8"), (), hostile, False)),
        legacy_schema(**LEGACY_FIELDS, evil=legacy_field("evil", hostile, (), None, False)),
        whole(instance("petastorm.unischema", "Unischema", {"_name": hostile, "_fields": {}})),
    ):
        with pytest.raises(FormatError, match=re.escape(refusal)):
            loads_unischema(blob)
        with pytest.raises(FormatError, match=re.escape(refusal)):
            loads_rowgroup_indexes(blob)
    assert not marker.exists()


def test_a_real_legacy_pickle_with_a_global_swapped_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    blob = legacy_schema(**LEGACY_FIELDS)
    # protocol 0 is text: swapping one GLOBAL line keeps every other opcode valid
    swapped = blob.replace(b"cpetastorm.codecs\nNdarrayCodec\n", b"cos\nsystem\n")
    assert swapped != blob
    with pytest.raises(FormatError, match="refusing to load os.system"):
        loads_unischema(swapped)
    swapped = blob.replace(b"cnumpy\nint64\n", b"c__builtin__\neval\n")
    with pytest.raises(FormatError, match="refusing to load __builtin__.eval"):
        loads_unischema(swapped)
    assert not marker.exists()


def test_memo_and_size_bombs_are_refused_before_unpickling() -> None:
    # a PUT at index 2**32-1 makes CPython's unpickler allocate a 32 GiB memo
    with pytest.raises(FormatError, match="memo index"):
        loads_unischema(b"(dp4294967295\n.")
    with pytest.raises(FormatError, match="memo index"):
        loads_unischema(b"\x80\x02}r\xff\xff\xff\x7f.")
    with pytest.raises(FormatError, match="too large"):
        loads_unischema(b"N" * (17 * 2**20) + b".")


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.data())
def test_damaged_legacy_pickles_are_format_errors(data: st.DataObject) -> None:
    """Any byte-level damage to a legacy schema or row-group index: a schema or a FormatError, never
    another exception (the schema it gives, if any, also describes itself without one)."""
    blob = bytearray(data.draw(st.sampled_from(DAMAGEABLE)))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(blob) - 1))
        kind = data.draw(st.sampled_from(["set", "delete", "insert"]))
        if kind == "set":
            blob[pos] = data.draw(st.integers(0, 255))
        elif kind == "delete":
            del blob[pos : pos + data.draw(st.integers(1, 8))]
        else:
            blob[pos:pos] = data.draw(st.binary(min_size=1, max_size=4))
    for load in (loads_unischema, loads_rowgroup_indexes):
        try:
            out = load(bytes(blob))
        except DalError:
            continue
        if isinstance(out, TensorSchema):
            try:
                out.to_catalog()
            except DalError:
                pass


def _index_blob() -> bytes:
    dtype = R(G("numpy", "dtype"), ("i8", 0, 1), (3, "<", None, None, None, -1, -1, 0))
    value = R(G("numpy.core.multiarray", "scalar"), (dtype, (7).to_bytes(8, "little")))
    index = R(
        G("collections", "defaultdict"),
        (G("__builtin__", "set"),),
        items=((value, R(G("__builtin__", "set"), ([0],))),),
    )
    state = {"_index_name": "id", "_column_name": "id", "_index_data": index}
    return whole({"id": instance("petastorm.etl.rowgroup_indexers", "SingleFieldIndexer", state)})


DAMAGEABLE = [legacy_schema(**LEGACY_FIELDS), _index_blob(), dumps_unischema(SCHEMA), pickle.dumps({"a": 1})]


def test_storage_types_round_trip_through_the_spark_types_petastorm_pickles() -> None:
    from decimal import Decimal

    import pyarrow as pa

    schema = TensorSchema("Types", [
        TensorField("ts", np.datetime64, (), ScalarCodec(pa.timestamp("us"))),
        TensorField("day", np.datetime64, (), ScalarCodec(pa.date32())),
        TensorField("dec", Decimal, (), ScalarCodec(pa.decimal128(12, 4)), nullable=True),
        TensorField("u8", np.uint8, (), ScalarCodec(pa.int16())),
        TensorField("f16", np.float16, (), ScalarCodec(pa.float32())),
    ])  # fmt: skip
    blob = dumps_unischema(schema)
    names = {arg for op, arg, _ in pickletools.genops(blob) if op.name == "GLOBAL"}
    assert {"decimal Decimal", "numpy datetime64", "pyspark.sql.types DecimalType", "pyspark.sql.types DateType",
            "pyspark.sql.types TimestampType", "pyspark.sql.types ShortType"} <= names  # fmt: skip
    back = loads_unischema(blob)
    assert [(f.name, f.dtype_name, f.codec, f.nullable) for f in back] == [
        (f.name, f.dtype_name, f.codec, f.nullable) for f in schema
    ]
    with pytest.raises(FormatError, match="no Spark type"):
        dumps_unischema(TensorSchema("T", [TensorField("t", np.int32, (), ScalarCodec(pa.time64("us")))]))
