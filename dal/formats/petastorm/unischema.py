"""Petastorm's pickled ``Unischema`` (and row-group indexes), written and read without importing petastorm.

Petastorm stores its schema as a pickle in ``_common_metadata``. Reading one with ``pickle.loads`` would
run whatever the pickle names, so ``loads_unischema`` uses a restricted unpickler: every global a real
petastorm dataset names resolves to an inert stand-in, and anything else is refused before it can run.
"Every global" covers each petastorm version since 0.4 (and its pre-release package name), pickles written
by Python 2 (protocol 0, ``copy_reg``/``__builtin__`` names, pyspark's namedtuple hijack
``pyspark.serializers._restore``) and Python 3 (protocols 0-5), and NumPy 1 and 2 names (``numpy.string_``,
``numpy.unicode_``, ``numpy.bool``, ``numpy.core``/``numpy._core``):

- classes (``Unischema``, petastorm's codecs, pyspark SQL types, row-group indexers) become stand-in
  classes whose instances only hold the pickled state;
- NumPy scalar types, ``decimal.Decimal`` and builtin types used as a field's dtype become
  ``_TypeRef`` tokens, which cannot be called;
- the few functions a pickle calls (``copy_reg._reconstructor``, ``_restore``, ``numpy.dtype``,
  ``numpy.core.multiarray.scalar``, ``_codecs.encode``, ``collections.OrderedDict``/``defaultdict``,
  ``set``) are replaced by checked versions that build plain data and refuse any other argument.

Python 2 ``str`` objects are read as latin-1 text (the only decoding that round-trips every byte; NumPy
re-encodes scalar data with it, as its own unpickler does).

``dumps_unischema`` writes the pickle petastorm itself would (protocol 2 opcodes naming
``petastorm.unischema.UnischemaField`` & co.), so petastorm 0.13.1 reads dal-written datasets.

Why one module: the restricted unpickler, its opcode prescan and the inert stand-in classes are one security
boundary and are reviewed together.
"""

from __future__ import annotations

import io
import pickle
import pickletools
import reprlib
import struct
from collections import OrderedDict, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa

from dal.errors import DalError, FormatError
from dal.tensors.codecs import (
    Codec,
    CompressedNdarrayCodec,
    ImageCodec,
    NdarrayCodec,
    ScalarCodec,
    default_storage,
    dtype_name,
)
from dal.tensors.schema import TensorField, TensorSchema

UNISCHEMA_KEY = b"dataset-toolkit.unischema.v1"
ROW_GROUPS_PER_FILE_KEY = b"dataset-toolkit.num_row_groups_per_file.v1"
ROWGROUPS_INDEX_KEY = b"dataset-toolkit.rowgroups_index.v1"

# numpy scalar type names a Unischema may reference (NumPy 1 and 2 spellings), and the numpy type each means
_NUMPY_TYPES: dict[str, Any] = {
    **{n: np.dtype(n).type for n in (
        "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64",
        "complex64", "complex128", "datetime64", "timedelta64",
    )},
    "bool_": np.bool_, "bool": np.bool_, "bool8": np.bool_,
    "str_": np.str_, "unicode_": np.str_, "unicode": np.str_,
    "bytes_": np.bytes_, "string_": np.bytes_,
    "object_": np.object_,
    "int_": np.dtype("int64").type, "float_": np.float64, "double": np.float64, "single": np.float32,
    "half": np.float16, "longlong": np.longlong, "ulonglong": np.ulonglong, "intc": np.intc, "uintc": np.uintc,
    "short": np.short, "ushort": np.ushort, "byte": np.byte, "ubyte": np.ubyte, "complex_": np.complex128,
    "cfloat": np.complex128, "csingle": np.complex64, "cdouble": np.complex128,
}  # fmt: skip
_NUMPY_OF_DTYPE = {"str": "str_", "bytes": "bytes_", "bool": "bool_"}
# Python builtins a Unischema may name as a dtype (Python 2 and 3 names), and the numpy type each means
_BUILTIN_TYPES: dict[str, Any] = {
    "str": np.str_, "unicode": np.str_, "bytes": np.bytes_, "int": np.int64, "long": np.int64,
    "float": np.float64, "bool": np.bool_,
}  # fmt: skip
# pyspark's SQL types (all of pyspark.sql.types' simple and nested types: state only, never code)
_SPARK_TYPES = {
    "NullType", "ByteType", "ShortType", "IntegerType", "LongType", "FloatType", "DoubleType", "StringType",
    "BooleanType", "BinaryType", "DateType", "TimestampType", "TimestampNTZType", "DecimalType", "CharType",
    "VarcharType", "DayTimeIntervalType", "YearMonthIntervalType", "CalendarIntervalType", "ArrayType",
    "MapType", "StructType", "StructField",
}  # fmt: skip
_SPARK_OF_DTYPE = {
    "int8": "ByteType", "uint8": "ShortType", "int16": "ShortType", "uint16": "IntegerType", "int32": "IntegerType",
    "uint32": "LongType", "int64": "LongType", "float32": "FloatType", "float64": "DoubleType", "str": "StringType",
    "bool": "BooleanType", "bytes": "BinaryType",
}  # fmt: skip
# the Arrow type Spark stores each simple SQL type as (what petastorm's ScalarCodec(spark_type) writes)
_ARROW_OF_SPARK = {
    "ByteType": pa.int8(), "ShortType": pa.int16(), "IntegerType": pa.int32(), "LongType": pa.int64(),
    "FloatType": pa.float32(), "DoubleType": pa.float64(), "StringType": pa.string(), "BooleanType": pa.bool_(),
    "BinaryType": pa.binary(), "DateType": pa.date32(), "TimestampType": pa.timestamp("us"),
    "TimestampNTZType": pa.timestamp("us"),
}  # fmt: skip
_LEGACY_PREFIX = "av.experimental.deepdrive.dataset_toolkit"  # petastorm's name before it was open-sourced
_FIELD_NAMES = ("name", "numpy_dtype", "shape", "codec", "nullable")
_DTYPE_KINDS = "biufcSUMm"  # what numpy.dtype(...) may build here: no objects, no records


# --- reading --------------------------------------------------------------------------------------


class _Stub:
    """An inert stand-in for a pickled class: instances hold a dict of state and nothing else."""

    kind = "object"

    def __new__(cls, *args: Any) -> _Stub:
        if args:
            raise pickle.UnpicklingError(f"refusing to construct {cls.kind} with arguments")
        return object.__new__(cls)

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) == 2 and state[1] is None:  # (dict, slots) with no slots
            state = state[0]
        if state is None:
            return
        if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
            raise pickle.UnpicklingError(f"{self.kind}: unexpected pickled state {type(state).__name__}")
        self.__dict__.update(state)


class _StubUnischema(_Stub):
    kind = "Unischema"


class _StubField(tuple):  # type: ignore[type-arg]
    """UnischemaField is a namedtuple: NEWOBJ calls ``cls.__new__(cls, *fields)``."""

    def __new__(cls, *args: Any) -> _StubField:
        if len(args) > len(_FIELD_NAMES):
            raise pickle.UnpicklingError(f"a UnischemaField has at most {len(_FIELD_NAMES)} values")
        return tuple.__new__(cls, args)


def _stub_class(kind: str) -> type[_Stub]:
    return type(f"Stub{kind}", (_Stub,), {"kind": kind})


_CODEC_STUBS = {
    name: _stub_class(name)
    for name in ("ScalarCodec", "NdarrayCodec", "CompressedNdarrayCodec", "CompressedImageCodec")
}
_SPARK_STUBS = {name: _stub_class(name) for name in _SPARK_TYPES}
_INDEXER_STUBS = {name: _stub_class(name) for name in ("SingleFieldIndexer", "FieldNotNullIndexer")}


@dataclass(frozen=True)
class _TypeRef:
    """A type named as data (a field's dtype, a ``copy_reg`` base class): it cannot be called."""

    module: str
    name: str
    value: Any = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise pickle.UnpicklingError(f"refusing to call {self.module}.{self.name}: only named as a type here")


_OBJECT = _TypeRef("builtins", "object")
_TUPLE = _TypeRef("builtins", "tuple")


class _DType:
    """``numpy.dtype(spec, align, copy)`` for a plain scalar dtype, then its pickled state (byte order,
    datetime unit) applied as data."""

    def __init__(self, dtype: np.dtype[Any]) -> None:
        self.dtype = dtype

    def __setstate__(self, state: Any) -> None:
        if not isinstance(state, tuple) or len(state) not in (8, 9) or any(x is not None for x in state[2:5]):
            raise pickle.UnpicklingError("numpy.dtype: only the state of a plain scalar dtype is accepted")
        dtype = self.dtype
        if len(state) == 9 and state[8] is not None and dtype.kind in "mM":
            unit, count = state[8][0], state[8][1]
            unit = unit.decode("latin1") if isinstance(unit, bytes) else unit
            if not isinstance(unit, str) or not unit.isalpha() or not isinstance(count, int):
                raise pickle.UnpicklingError("numpy.dtype: malformed datetime unit")
            dtype = np.dtype(f"{dtype.kind}8[{'' if count == 1 else count}{unit}]")
        if state[1] in ("<", ">") and dtype.byteorder not in ("|",):
            dtype = dtype.newbyteorder(state[1])
        self.dtype = dtype


def _safe_dtype(spec: Any, align: Any = False, copy: Any = False) -> _DType:
    if not isinstance(spec, str) or len(spec) > 16:
        raise pickle.UnpicklingError("numpy.dtype: only a short type string is accepted")
    dtype = np.dtype(spec)
    if dtype.kind not in _DTYPE_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise pickle.UnpicklingError(f"numpy.dtype: refusing dtype {spec!r} (objects and records are not data)")
    return _DType(dtype)


def _safe_scalar(dtype: Any, data: Any = None) -> Any:
    """numpy's ``multiarray.scalar(dtype, bytes)``: a scalar of a plain dtype from its raw bytes."""
    if not isinstance(dtype, _DType):
        raise pickle.UnpicklingError("numpy scalar: the dtype must be a plain numpy.dtype")
    if isinstance(data, str):
        data = data.encode("latin1")  # a Python 2 str, read as latin-1
    if not isinstance(data, bytes) or len(data) != dtype.dtype.itemsize:
        raise pickle.UnpicklingError("numpy scalar: the data must be the dtype's bytes")
    return np.frombuffer(data, dtype=dtype.dtype)[0]


def _safe_encode(text: Any, encoding: Any = "utf-8") -> bytes:
    """``_codecs.encode(str, 'latin1')``: how Python 3 pickles bytes at protocols 0-2."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError("_codecs.encode: only latin-1 text is accepted")
    return text.encode("latin1")


def _safe_reconstructor(cls: Any, base: Any, state: Any) -> Any:
    """copy_reg._reconstructor (protocol 0/1 pickles), limited to the stand-ins."""
    if cls is _StubField and base is _TUPLE and isinstance(state, tuple):
        return _StubField(*state)
    if isinstance(cls, type) and issubclass(cls, _Stub) and base is _OBJECT and state is None:
        return cls()
    raise pickle.UnpicklingError("copy_reg._reconstructor is only allowed for petastorm schema classes")


def _safe_restore(name: Any, fields: Any, values: Any) -> _StubField:
    """pyspark.serializers._restore: how pyspark 2 pickled namedtuples (petastorm < 0.7's UnischemaField)."""
    if (
        name != "UnischemaField"
        or not isinstance(fields, tuple)
        or fields != _FIELD_NAMES[: len(fields)]
        or not isinstance(values, tuple)
        or len(values) != len(fields)
    ):
        raise pickle.UnpicklingError("pyspark.serializers._restore is only allowed for petastorm's UnischemaField")
    return _StubField(*values)


def _safe_defaultdict(factory: Any = None, *rest: Any) -> defaultdict[Any, Any]:
    if rest or not (factory is None or factory is _safe_set):
        raise pickle.UnpicklingError("collections.defaultdict: only a set factory is accepted")
    return defaultdict(None if factory is None else set)


def _safe_ordered_dict(items: Any = ()) -> OrderedDict[Any, Any]:
    if not isinstance(items, (list, tuple)) or not all(isinstance(kv, (list, tuple)) and len(kv) == 2 for kv in items):
        raise pickle.UnpicklingError("collections.OrderedDict: only a list of pairs is accepted")
    return OrderedDict((k, v) for k, v in items)


def _safe_set(items: Any = ()) -> set[Any]:
    if not isinstance(items, (list, tuple, set, frozenset)):
        raise pickle.UnpicklingError("set: only a list of values is accepted")
    return set(items)


_GLOBALS: dict[tuple[str, str], Any] = {
    ("petastorm.unischema", "Unischema"): _StubUnischema,
    ("petastorm.unischema", "UnischemaField"): _StubField,
    **{("petastorm.codecs", n): c for n, c in _CODEC_STUBS.items()},
    **{("petastorm.etl.rowgroup_indexers", n): c for n, c in _INDEXER_STUBS.items()},
    **{("pyspark.sql.types", n): c for n, c in _SPARK_STUBS.items()},
    ("pyspark.serializers", "_restore"): _safe_restore,
    ("copy_reg", "_reconstructor"): _safe_reconstructor,
    ("copyreg", "_reconstructor"): _safe_reconstructor,
    ("__builtin__", "object"): _OBJECT,
    ("builtins", "object"): _OBJECT,
    ("__builtin__", "tuple"): _TUPLE,
    ("builtins", "tuple"): _TUPLE,
    ("__builtin__", "set"): _safe_set,
    ("builtins", "set"): _safe_set,
    ("collections", "OrderedDict"): _safe_ordered_dict,
    ("collections", "defaultdict"): _safe_defaultdict,
    ("decimal", "Decimal"): _TypeRef("decimal", "Decimal", Decimal),
    ("numpy", "dtype"): _safe_dtype,
    ("numpy.core.multiarray", "scalar"): _safe_scalar,
    ("numpy._core.multiarray", "scalar"): _safe_scalar,
    ("_codecs", "encode"): _safe_encode,
    **{("numpy", n): _TypeRef("numpy", n, t) for n, t in _NUMPY_TYPES.items()},
    **{("builtins", n): _TypeRef("builtins", n, t) for n, t in _BUILTIN_TYPES.items() if n not in ("unicode", "long")},
    **{("__builtin__", n): _TypeRef("__builtin__", n, t) for n, t in _BUILTIN_TYPES.items() if n != "bytes"},
}


class _RestrictedUnpickler(pickle.Unpickler):
    def __init__(self, data: bytes) -> None:
        # Python 2 str objects (protocol 0-2 STRING opcodes) as latin-1 text: every byte round-trips
        super().__init__(io.BytesIO(data), encoding="latin1", errors="strict")

    def find_class(self, module: str, name: str) -> Any:
        if module.startswith(_LEGACY_PREFIX):
            module = "petastorm" + module[len(_LEGACY_PREFIX) :]
        found = _GLOBALS.get((module, name))
        if found is None:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}: not part of a petastorm dataset")
        return found


_MAX_PICKLE = 16 * 2**20  # a Unischema or row-group index is kilobytes; a bigger one is not metadata
# a Unischema nests about 6 deep (Unischema > OrderedDict > field > codec > Spark type > its state)
_MAX_DEPTH = 64
# elements counted as written out: a memo-shared "billion laughs" list of 830 bytes stands for 2**100 of them,
# which str() or a walk would never finish; no pickle of _MAX_PICKLE bytes needs more without sharing
_MAX_ELEMENTS = _MAX_PICKLE
_MEMO_PUT = {"PUT", "BINPUT", "LONG_BINPUT"}
_MEMO_GET = {"GET", "BINGET", "LONG_BINGET"}
_MUTATORS = {"APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS", "BUILD"}  # the first operand is kept
_OPCODES = {op.code: op for op in pickletools.opcodes}


class _Shape:
    """What the prescan knows of one value on the unpickler's stack: nesting depth and elements written out
    (the same ``_Shape`` wherever the memo shares the value, so a container filled later counts in full)."""

    __slots__ = ("depth", "size")

    def __init__(self, children: list[_Shape] = []) -> None:  # noqa: B006 - never mutated
        self.depth = 0
        self.size = 1
        self.adopt(children)

    def adopt(self, children: list[_Shape]) -> None:
        for child in children:
            self.depth = max(self.depth, child.depth + 1)
            self.size = min(self.size + child.size, _MAX_ELEMENTS + 1)
        if self.depth > _MAX_DEPTH:
            raise pickle.UnpicklingError(f"nested deeper than {_MAX_DEPTH} levels")
        if self.size > _MAX_ELEMENTS:
            raise pickle.UnpicklingError(f"more than {_MAX_ELEMENTS:,} elements (counting shared ones each time)")


def _prescan(data: bytes) -> None:
    """Walk the opcodes without running any before unpickling, tracking the shape of what each would build:
    refuse oversized pickles, memo indexes beyond the pickle's own length (``p4294967295`` would make the
    unpickler allocate a 32 GiB memo), values nested deeper than ``_MAX_DEPTH`` (a 200,000-deep list) and
    more than ``_MAX_ELEMENTS`` elements counted as written out (memo-shared "billion laughs")."""
    if len(data) > _MAX_PICKLE:
        raise pickle.UnpicklingError(f"{len(data)} bytes is too large for petastorm metadata")
    f = io.BytesIO(data)
    stack: list[_Shape] = []
    marks: list[int] = []
    memo: dict[int, _Shape] = {}
    while True:
        code = f.read(1)
        op = _OPCODES.get(code.decode("latin1"))
        if op is None:
            raise pickle.UnpicklingError(f"unknown opcode {code!r} at byte {f.tell() - 1}")
        if op.arg is None:
            arg = None
        elif op.arg.name == "stringnl":  # a Python 2 str: pickletools would insist on ASCII, the unpickler does not
            arg = f.readline()
        else:
            arg = op.arg.reader(f)
        if op.name in _MEMO_PUT | _MEMO_GET and not (isinstance(arg, int) and 0 <= arg <= len(data)):
            raise pickle.UnpicklingError(f"memo index {arg!r} out of range")
        try:
            _step(op, arg, stack, marks, memo)
        except IndexError:
            raise pickle.UnpicklingError(f"malformed pickle: {op.name} on too short a stack") from None
        if op.name == "STOP":
            return


def _step(op: Any, arg: Any, stack: list[_Shape], marks: list[int], memo: dict[int, _Shape]) -> None:
    """``op``'s effect on the shapes of the unpickler's stack (see ``_prescan``)."""
    name, before, after = op.name, op.stack_before, op.stack_after
    if name == "MARK":
        marks.append(len(stack))
    elif name in _MEMO_PUT or name == "MEMOIZE":
        memo[len(memo) if name == "MEMOIZE" else arg] = stack[-1]
    elif name in _MEMO_GET:
        if arg not in memo:
            raise pickle.UnpicklingError(f"memo index {arg} was never stored")
        stack.append(memo[arg])
    elif name == "DUP":
        stack.append(stack[-1])
    else:
        if pickletools.markobject in before:
            mark = marks.pop()
            start = mark - before.index(pickletools.markobject)
            if start < 0:
                raise IndexError
        else:
            start = len(stack) - len(before)
            if start < 0:
                raise IndexError
        operands = stack[start:]
        del stack[start:]
        if name in _MUTATORS:
            operands[0].adopt(operands[1:])
            stack.append(operands[0])
        elif after:
            stack.append(_Shape(operands))


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 80


def _short(value: Any) -> str:
    """A bounded repr for messages: a few elements and levels of a value that came out of a pickle."""
    return _REPR.repr(value)


def _load(data: bytes, what: str) -> Any:
    try:
        _prescan(data)
        return _RestrictedUnpickler(data).load()
    except RecursionError as e:
        raise FormatError(f"petastorm {what} metadata refused: nested too deeply") from e
    except Exception as e:  # every callable a pickle can reach here is a checked stand-in: any error is bad data
        raise FormatError(f"petastorm {what} metadata refused: {e}") from e


def _field_dtype(value: Any, field: str) -> Any:
    if isinstance(value, _TypeRef) and value.value is not None:
        return value.value
    if isinstance(value, _DType):
        return value.dtype
    raise FormatError(f"field {field!r}: its dtype {_short(value)} is not a numpy type petastorm writes")


def _storage(stub: Any, stored: pa.DataType | None) -> pa.DataType | None:
    """The Arrow type a scalar is stored as: the files' own (``_common_metadata``), else its Spark type's."""
    if stored is not None:
        return stored
    kind = getattr(stub, "kind", None)
    if kind == "DecimalType":
        state = vars(stub)
        return pa.decimal128(int(state.get("precision", 10)), int(state.get("scale", 0)))
    return _ARROW_OF_SPARK.get(str(kind))


def _codec(stub: Any, field: str, stored: pa.DataType | None) -> Codec | None:
    kind = getattr(stub, "kind", None)
    state = vars(stub) if isinstance(stub, _Stub) else {}
    if stub is None:
        return ScalarCodec(stored) if stored is not None else None
    if kind == "ScalarCodec":
        storage = _storage(state.get("_spark_type"), stored)
        return ScalarCodec(storage)
    if kind == "NdarrayCodec":
        return NdarrayCodec()
    if kind == "CompressedNdarrayCodec":
        return CompressedNdarrayCodec()
    if kind == "CompressedImageCodec":
        image_codec = state.get("_image_codec", ".png")
        if not isinstance(image_codec, str):
            raise FormatError(f"field {field!r}: its image codec is a {type(image_codec).__name__}, not a string")
        fmt = image_codec.lstrip(".")
        try:
            return ImageCodec(fmt, int(state.get("_quality", 80)))
        except ValueError as e:
            raise FormatError(f"field {field!r}: {e}") from e
    raise FormatError(f"field {field!r} uses an unknown petastorm codec {kind!r}")


def loads_unischema(data: bytes, stored: pa.Schema | None = None) -> TensorSchema:
    """Read petastorm's pickled Unischema into a ``TensorSchema``, running nothing the pickle names.

    ``stored`` is the Arrow schema next to it in ``_common_metadata`` (the data files' columns): scalar
    fields keep the type they are stored as there (petastorm stores ``uint8`` as int16, ``Decimal`` as
    ``decimal128(p, s)``, ...); without it, the type their Spark type implies.

    Raises:
        FormatError: the pickle names anything outside a petastorm schema, or is malformed.
    """
    obj = _load(data, "schema")
    if not isinstance(obj, _StubUnischema):
        raise FormatError(f"petastorm schema metadata holds a {type(obj).__name__}, not a Unischema")
    state = vars(obj)
    fields_state = state.get("_fields") or {}
    if not isinstance(fields_state, Mapping):
        raise FormatError("petastorm schema metadata has malformed fields")
    fields = [_loaded_field(value, stored) for value in fields_state.values()]
    name = state.get("_name", "unischema")
    if not isinstance(name, str):  # never str() a pickled structure: it may stand for billions of elements
        raise FormatError(f"petastorm schema metadata has a {type(name).__name__} as its name, not a string")
    try:
        return TensorSchema(name, fields)
    except DalError as e:
        raise FormatError(f"petastorm schema metadata: {e}") from e


def _loaded_field(value: Any, stored: pa.Schema | None) -> TensorField:
    """One pickled UnischemaField (a stub of its namedtuple) as a ``TensorField``.

    Raises:
        FormatError: malformed, or naming a type or codec petastorm does not have.
    """
    if not isinstance(value, _StubField) or len(value) < 3:
        raise FormatError("petastorm schema metadata has a malformed field")
    name, np_type, shape = value[0], value[1], value[2]
    if not isinstance(name, str) or not isinstance(shape, (tuple, list)):
        raise FormatError("petastorm schema metadata has a malformed field")
    if not all(d is None or (isinstance(d, int) and not isinstance(d, bool) and d >= 0) for d in shape):
        raise FormatError(f"field {name!r} has a malformed shape {_short(shape)}")
    codec = value[3] if len(value) > 3 else None
    nullable = bool(value[4]) if len(value) > 4 else False
    column = stored.field(name) if stored is not None and name in stored.names else None
    kept = column.type if column is not None and not shape else None
    try:
        return TensorField(name, _field_dtype(np_type, name), tuple(shape), _codec(codec, name, kept), nullable)
    except (TypeError, ValueError) as e:
        raise FormatError(f"field {name!r}: {e}") from e


@dataclass(frozen=True)
class RowGroupIndex:
    """One of petastorm's row-group indexes (``build_rowgroup_index``): for each value of ``column``, the
    row groups (pieces, in petastorm's order) holding it; a not-null index has the one key ``None``."""

    name: str
    column: str
    kind: str
    pieces: Mapping[Any, frozenset[int]]


def loads_rowgroup_indexes(data: bytes) -> dict[str, RowGroupIndex]:
    """Read petastorm's pickled row-group indexes (``dataset-toolkit.rowgroups_index.v1``), running nothing.

    Raises:
        FormatError: the pickle names anything outside petastorm's indexers, or is malformed.
    """
    obj = _load(data, "row-group index")
    if not isinstance(obj, dict):
        raise FormatError(f"petastorm row-group index metadata holds a {type(obj).__name__}, not a dict")
    out = {}
    for key, indexer in obj.items():
        if not isinstance(indexer, _Stub) or indexer.kind not in _INDEXER_STUBS:
            raise FormatError(f"petastorm row-group index {_short(key)} is not a petastorm indexer")
        state = vars(indexer)
        data_ = state.get("_index_data")
        try:
            if isinstance(data_, Mapping):
                pieces = {_plain(k): _pieces(v) for k, v in data_.items()}
            elif isinstance(data_, (set, frozenset, list)):
                pieces = {None: _pieces(data_)}
            else:
                raise TypeError(type(data_).__name__)
        except (TypeError, ValueError) as e:
            raise FormatError(f"petastorm row-group index {_short(key)} has malformed data ({e})") from e
        name, column = state.get("_index_name", key), state.get("_column_name", "")
        if not (isinstance(key, str) and isinstance(name, str) and isinstance(column, str)):
            raise FormatError(f"petastorm row-group index {_short(key)}: its names are not strings")
        out[key] = RowGroupIndex(name, column, indexer.kind, pieces)
    return out


def _pieces(value: Any) -> frozenset[int]:
    if not isinstance(value, (set, frozenset, list, tuple)) or not all(
        isinstance(p, (int, np.integer)) and not isinstance(p, bool) for p in value
    ):
        raise TypeError("row groups must be a set of ints")
    return frozenset(int(p) for p in value)


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


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


def _emit_plain(obj: Any, out: bytearray) -> bool:
    """``obj`` as pickle opcodes when it is None, a bool, an int, a float or a str (False: none of those)."""
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
    else:
        return False
    return True


def _emit(obj: Any, out: bytearray) -> None:
    if _emit_plain(obj, out):
        return
    if isinstance(obj, tuple):
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


def _spark_node(field: TensorField, codec: ScalarCodec) -> _NewObj:
    """The pyspark SQL type of a scalar field, as petastorm's ``ScalarCodec(spark_type)`` pickles it."""
    if codec.storage is None:
        spark = _SPARK_OF_DTYPE.get(field.dtype_name)
        if spark is None:
            raise FormatError(f"field {field.name!r}: petastorm has no Spark type for dtype {field.dtype_name}")
        return _NewObj(_Global("pyspark.sql.types", spark))
    storage = field.storage_type()
    if pa.types.is_decimal(storage):
        state = {"precision": storage.precision, "scale": storage.scale, "hasPrecisionInfo": True}
        return _NewObj(_Global("pyspark.sql.types", "DecimalType"), (), state)
    if pa.types.is_timestamp(storage):
        return _NewObj(_Global("pyspark.sql.types", "TimestampType"))
    spark = next((k for k, v in _ARROW_OF_SPARK.items() if v == storage), None)
    if spark is None:
        raise FormatError(f"field {field.name!r}: petastorm has no Spark type for Arrow type {storage}")
    return _NewObj(_Global("pyspark.sql.types", spark))


def _codec_node(field: TensorField) -> _NewObj:
    codec = field.the_codec
    if isinstance(codec, ScalarCodec):
        return _NewObj(_Global("petastorm.codecs", "ScalarCodec"), (), {"_spark_type": _spark_node(field, codec)})
    if isinstance(codec, NdarrayCodec):
        return _NewObj(_Global("petastorm.codecs", "NdarrayCodec"))
    if isinstance(codec, CompressedNdarrayCodec):
        return _NewObj(_Global("petastorm.codecs", "CompressedNdarrayCodec"))
    if isinstance(codec, ImageCodec):
        state = {"_image_codec": "." + codec.format, "_quality": codec.quality}
        return _NewObj(_Global("petastorm.codecs", "CompressedImageCodec"), (), state)
    raise FormatError(f"field {field.name!r}: codec {codec!r} has no petastorm equivalent")


def _dtype_node(name: str) -> _Global:
    if name == "decimal":
        return _Global("decimal", "Decimal")
    if name.startswith("datetime64"):
        return _Global("numpy", "datetime64")  # petastorm's dtype for dates and timestamps alike
    return _Global("numpy", _NUMPY_OF_DTYPE.get(name, name))


def dumps_unischema(schema: TensorSchema) -> bytes:
    """The pickle petastorm writes for this schema (readable by petastorm's own ``pickle.loads``)."""
    fields = []
    for f in schema.fields:
        node = _NewObj(
            _Global("petastorm.unischema", "UnischemaField"),
            (f.name, _dtype_node(f.dtype_name), tuple(f.shape), _codec_node(f), f.nullable),
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


__all__ = [
    "ROWGROUPS_INDEX_KEY",
    "ROW_GROUPS_PER_FILE_KEY",
    "UNISCHEMA_KEY",
    "RowGroupIndex",
    "default_storage",
    "dtype_name",
    "dumps_unischema",
    "loads_rowgroup_indexes",
    "loads_unischema",
]
