"""Petastorm's pickled ``Unischema``, written and read without importing petastorm.

Petastorm stores its schema as a pickle in ``_common_metadata``. Reading one with ``pickle.loads`` would
run whatever the pickle names, so ``loads_unischema`` uses a restricted unpickler: only petastorm's
schema and codec classes, numpy scalar types, pyspark's simple SQL types and ``OrderedDict`` resolve,
each to an inert stand-in; anything else is refused before it can run.

``dumps_unischema`` writes the pickle petastorm itself would (protocol 2 opcodes naming
``petastorm.unischema.UnischemaField`` & co.), so petastorm 0.13.1 reads dal-written datasets.
"""

from __future__ import annotations

import pickle
import struct
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from dal.codecs import Codec, CompressedNdarrayCodec, ImageCodec, NdarrayCodec, ScalarCodec, dtype_name
from dal.errors import FormatError
from dal.tensors import TensorField, TensorSchema

UNISCHEMA_KEY = b"dataset-toolkit.unischema.v1"
ROW_GROUPS_PER_FILE_KEY = b"dataset-toolkit.num_row_groups_per_file.v1"

# numpy scalar type names a Unischema may reference, and the dtype names dal uses for them
_NUMPY_TYPES = {
    "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64",
    "bool_", "str_", "bytes_", "string_", "unicode_", "object_",
}  # fmt: skip
_NUMPY_OF_DTYPE = {"str": "str_", "bytes": "bytes_", "bool": "bool_"}
# pyspark's simple types, as petastorm's ScalarCodec pickles them (one per numpy dtype, as Unischema maps them)
_SPARK_TYPES = {
    "ByteType", "ShortType", "IntegerType", "LongType", "FloatType", "DoubleType", "StringType", "BooleanType",
    "BinaryType", "DateType", "TimestampType", "DecimalType",
}  # fmt: skip
_SPARK_OF_DTYPE = {
    "int8": "ByteType", "uint8": "ShortType", "int16": "ShortType", "uint16": "IntegerType", "int32": "IntegerType",
    "uint32": "LongType", "int64": "LongType", "float32": "FloatType", "float64": "DoubleType", "str": "StringType",
    "bool": "BooleanType", "bytes": "BinaryType",
}  # fmt: skip
_LEGACY_PREFIX = "av.experimental.deepdrive.dataset_toolkit"  # petastorm's name before it was open-sourced


# --- reading --------------------------------------------------------------------------------------


class _Stub:
    """An inert object: BUILD fills its ``__dict__``; nothing else can run."""

    kind = "object"


class _StubUnischema(_Stub):
    kind = "Unischema"


class _StubField(tuple):  # type: ignore[type-arg]
    """UnischemaField is a namedtuple: NEWOBJ calls ``cls.__new__(cls, *fields)``."""

    def __new__(cls, *args: Any) -> _StubField:
        return tuple.__new__(cls, args)


def _stub_class(kind: str) -> type:
    return type(f"Stub{kind}", (_Stub,), {"kind": kind})


_CODEC_STUBS = {
    name: _stub_class(name)
    for name in ("ScalarCodec", "NdarrayCodec", "CompressedNdarrayCodec", "CompressedImageCodec")
}
_SPARK_STUBS = {name: _stub_class(name) for name in _SPARK_TYPES}


def _safe_reconstructor(cls: type, base: type, state: Any) -> Any:
    """copyreg._reconstructor (protocol 0/1 pickles), limited to the stand-ins."""
    if not (isinstance(cls, type) and issubclass(cls, _Stub)) or base is not object:
        raise pickle.UnpicklingError("copyreg._reconstructor is only allowed for petastorm schema classes")
    return object.__new__(cls)


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module.startswith(_LEGACY_PREFIX):
            module = "petastorm" + module[len(_LEGACY_PREFIX) :]
        if module == "petastorm.unischema" and name == "Unischema":
            return _StubUnischema
        if module == "petastorm.unischema" and name == "UnischemaField":
            return _StubField
        if module == "petastorm.codecs" and name in _CODEC_STUBS:
            return _CODEC_STUBS[name]
        if module == "pyspark.sql.types" and name in _SPARK_STUBS:
            return _SPARK_STUBS[name]
        if (
            module == "numpy"
            and name in _NUMPY_TYPES
            and hasattr(np, name if name not in ("string_", "unicode_") else "bytes_")
        ):
            return {"string_": np.bytes_, "unicode_": np.str_}.get(name) or getattr(np, name)
        if (module, name) == ("collections", "OrderedDict"):
            return OrderedDict
        if (module, name) in (("copyreg", "_reconstructor"), ("copy_reg", "_reconstructor")):
            return _safe_reconstructor
        if (module, name) in (("builtins", "object"), ("__builtin__", "object")):
            return object
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: not part of a petastorm schema")


def _codec(stub: Any, field: str) -> Codec | None:
    if stub is None:
        return None
    kind = getattr(stub, "kind", None)
    state = vars(stub) if isinstance(stub, _Stub) else {}
    if kind == "ScalarCodec":
        return ScalarCodec()
    if kind == "NdarrayCodec":
        return NdarrayCodec()
    if kind == "CompressedNdarrayCodec":
        return CompressedNdarrayCodec()
    if kind == "CompressedImageCodec":
        fmt = str(state.get("_image_codec", ".png")).lstrip(".")
        return ImageCodec(fmt, int(state.get("_quality", 80)))
    raise FormatError(f"field {field!r} uses an unknown petastorm codec {kind!r}")


def loads_unischema(data: bytes) -> TensorSchema:
    """Read petastorm's pickled Unischema into a ``TensorSchema``, running nothing the pickle names.

    Raises:
        FormatError: the pickle names anything outside a petastorm schema, or is malformed.
    """
    import io

    try:
        obj = _RestrictedUnpickler(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, AttributeError, EOFError, TypeError, ValueError) as e:
        raise FormatError(f"petastorm schema metadata refused: {e}") from e
    if not isinstance(obj, _StubUnischema):
        raise FormatError(f"petastorm schema metadata holds a {type(obj).__name__}, not a Unischema")
    state = vars(obj)
    fields = []
    for value in (state.get("_fields") or {}).values():
        if not isinstance(value, _StubField) or len(value) < 3:
            raise FormatError("petastorm schema metadata has a malformed field")
        name, np_type, shape = value[0], value[1], value[2]
        codec = value[3] if len(value) > 3 else None
        nullable = bool(value[4]) if len(value) > 4 else False
        fields.append(TensorField(str(name), np_type, tuple(shape), _codec(codec, str(name)), nullable))
    return TensorSchema(str(state.get("_name", "unischema")), fields)


# --- writing --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Global:
    module: str
    name: str


@dataclass(frozen=True)
class _NewObj:
    cls: _Global
    args: tuple[Any, ...] = ()
    state: dict[str, Any] | None = None


@dataclass(frozen=True)
class _Reduce:
    func: _Global
    args: tuple[Any, ...] = ()


def _emit(obj: Any, out: bytearray) -> None:
    if obj is None:
        out += b"N"
    elif obj is True or obj is False:
        out += b"\x88" if obj else b"\x89"
    elif isinstance(obj, int):
        out += b"J" + struct.pack("<i", obj)
    elif isinstance(obj, float):
        out += b"G" + struct.pack(">d", obj)
    elif isinstance(obj, str):
        raw = obj.encode()
        out += b"X" + struct.pack("<I", len(raw)) + raw
    elif isinstance(obj, tuple):
        if not obj:
            out += b")"
            return
        out += b"("
        for x in obj:
            _emit(x, out)
        out += b"t"
    elif isinstance(obj, list):
        out += b"]"
        if obj:
            out += b"("
            for x in obj:
                _emit(x, out)
            out += b"e"
    elif isinstance(obj, dict):
        out += b"}"
        if obj:
            out += b"("
            for k, v in obj.items():
                _emit(k, out)
                _emit(v, out)
            out += b"u"
    elif isinstance(obj, _Global):
        out += b"c" + obj.module.encode() + b"\n" + obj.name.encode() + b"\n"
    elif isinstance(obj, _NewObj):
        _emit(obj.cls, out)
        _emit(tuple(obj.args), out)
        out += b"\x81"
        if obj.state:
            _emit(obj.state, out)
            out += b"b"
    elif isinstance(obj, _Reduce):
        _emit(obj.func, out)
        _emit(tuple(obj.args), out)
        out += b"R"
    else:  # pragma: no cover - only the node types above are built here
        raise TypeError(f"cannot emit {type(obj).__name__}")


def _codec_node(field: TensorField) -> _NewObj:
    codec = field.the_codec
    if isinstance(codec, ScalarCodec):
        spark = _SPARK_OF_DTYPE.get(field.dtype_name)
        if spark is None:
            raise FormatError(f"field {field.name!r}: petastorm has no Spark type for dtype {field.dtype_name}")
        return _NewObj(
            _Global("petastorm.codecs", "ScalarCodec"),
            (),
            {"_spark_type": _NewObj(_Global("pyspark.sql.types", spark))},
        )
    if isinstance(codec, NdarrayCodec):
        return _NewObj(_Global("petastorm.codecs", "NdarrayCodec"))
    if isinstance(codec, CompressedNdarrayCodec):
        return _NewObj(_Global("petastorm.codecs", "CompressedNdarrayCodec"))
    if isinstance(codec, ImageCodec):
        state = {"_image_codec": "." + codec.format, "_quality": codec.quality}
        return _NewObj(_Global("petastorm.codecs", "CompressedImageCodec"), (), state)
    raise FormatError(f"field {field.name!r}: codec {codec!r} has no petastorm equivalent")


def dumps_unischema(schema: TensorSchema) -> bytes:
    """The pickle petastorm writes for this schema (readable by petastorm's own ``pickle.loads``)."""
    fields = []
    for f in schema.fields:
        np_name = _NUMPY_OF_DTYPE.get(f.dtype_name, f.dtype_name)
        node = _NewObj(
            _Global("petastorm.unischema", "UnischemaField"),
            (f.name, _Global("numpy", np_name), tuple(f.shape), _codec_node(f), f.nullable),
        )
        fields.append((f.name, node))
    ordered = _Reduce(_Global("collections", "OrderedDict"), ([tuple(kv) for kv in fields],))
    state: dict[str, Any] = {"_name": schema.name, "_fields": ordered}
    # Unischema.__init__ also exposes each field as an attribute; petastorm code reads them that way
    state.update({name: node for name, node in fields if name not in ("_name", "_fields")})
    out = bytearray(b"\x80\x02")
    _emit(_NewObj(_Global("petastorm.unischema", "Unischema"), (), state), out)
    out += b"."
    return bytes(out)


__all__ = ["ROW_GROUPS_PER_FILE_KEY", "UNISCHEMA_KEY", "dtype_name", "dumps_unischema", "loads_unischema"]
