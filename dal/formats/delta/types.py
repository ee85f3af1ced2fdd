"""Which Arrow types a Delta table holds, checked before anything is written.

Delta's types are Spark SQL's: byte/short/int/long, float/double, decimal(p<=38), string, binary, boolean,
date, timestamp (UTC instants) and timestamp_ntz, all in microseconds, and struct/array/map of them. An
Arrow type either maps onto one of them without losing a value, or the write is refused up front with the
column and a way out:

- stored as they are (delta-rs converts them): large/view strings and binaries, fixed-size binary,
  dictionaries, date64, large/fixed-size/view lists, timestamps in any unit and time zone (instants in UTC);
- converted here, checked value by value: unsigned integers to the next wider signed type (uint8 -> short,
  uint16 -> int, uint32 -> long: every value fits, where delta-rs's own same-width mapping refuses 255 in a
  uint8), uint64 to long (a value above 2**63-1 is refused), nanosecond timestamps to microseconds (a value
  with nanoseconds is refused: delta-rs would drop them silently), decimal32/64/256 of at most 38 digits to
  decimal128;
- refused: null (no type at all), float16, time of day, durations, intervals, unions, run-end encoding,
  extension types, decimals of more than 38 digits, structs without fields, column names that repeat
  (Delta compares names case-insensitively), and timestamps without time zone that appear only inside maps
  (delta-rs then cannot create the table).

``check_writable`` refuses by type (``dal.formats.delta.write.check_write``, both the Arrow and the Spark path);
``ConformedReader`` converts and checks values while delta-rs reads the stream, before anything is committed.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from dal.errors import SchemaMismatch
from dal.formats.logical import ARROW_TYPE_KEY, encode_tensor, recorded, stored_field, tensor_shape


def _refusal(t: pa.DataType) -> str | None:
    """Why ``t`` itself (not its children) cannot be stored in Delta, or None."""
    if pa.types.is_null(t):
        return "has no type (every value is missing); cast it to the type it should have"
    if pa.types.is_float16(t):
        return "Delta has no half-precision floats; cast it to float32"
    if pa.types.is_time(t):
        return "Delta has no time-of-day type; store it as int64 microseconds or a string"
    if pa.types.is_duration(t) or pa.types.is_interval(t):
        return "Delta has no duration or interval type; store it as an int64 count of a unit"
    if pa.types.is_union(t):
        return "Delta has no union type; split it into one column per alternative"
    if pa.types.is_run_end_encoded(t):
        return "decode it first (pyarrow.compute.run_end_decode)"
    if isinstance(t, pa.BaseExtensionType):
        return "Delta cannot record an extension type; cast it to its storage type"
    if pa.types.is_decimal(t) and t.precision > 38:
        return "Delta decimals hold at most 38 digits"
    if pa.types.is_struct(t) and t.num_fields == 0:
        return "a struct without fields cannot be stored in Parquet"
    return None


def _children(t: pa.DataType) -> list[tuple[str, pa.DataType]]:
    """(path suffix, type) of the nested types of ``t``."""
    if pa.types.is_struct(t):
        return [(f".{t.field(i).name}", t.field(i).type) for i in range(t.num_fields)]
    if pa.types.is_map(t):
        return [(".key", t.key_type), (".value", t.item_type)]
    if (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
    ):
        return [("[]", t.value_type)]
    if pa.types.is_dictionary(t):
        return [("", t.value_type)]
    return []


def _duplicates(names: list[str]) -> list[str]:
    seen: dict[str, str] = {}
    out = []
    for n in names:
        if n.lower() in seen:
            out.append(f"{seen[n.lower()]!r} and {n!r}")
        seen.setdefault(n.lower(), n)
    return out


def problems(schema: pa.Schema) -> list[str]:
    """Each column (path) of ``schema`` Delta cannot store, with its type and why; empty when all fit."""
    out: list[str] = []
    ntz: dict[str, bool] = {}  # path of each timestamp without time zone: inside a map?

    def walk(path: str, t: pa.DataType, in_map: bool) -> None:
        why = _refusal(t)
        if why is not None:
            out.append(f"{path} ({t}): {why}")
            return
        if pa.types.is_struct(t):
            out.extend(f"{path}: fields {d} differ only in case" for d in _duplicates([f.name for f in t]))
        if pa.types.is_timestamp(t) and t.tz is None:
            ntz[f"{path} ({t})"] = in_map
        for suffix, child in _children(t):
            walk(path + suffix, child, in_map or pa.types.is_map(t))

    out.extend(f"columns {d} differ only in case (Delta names are case-insensitive)" for d in _duplicates(schema.names))
    for f in schema:
        if tensor_shape(f.type) is None:  # a fixed-shape tensor is stored as binary (float16 included)
            walk(f.name, f.type, False)
    if ntz and all(ntz.values()):
        out.extend(
            f"{p}: delta-rs cannot create a table whose only timestamps without time zone are inside maps (it "
            "leaves out the timestampNtz feature); give them a time zone (UTC)"
            for p in ntz
        )
    return out


def check_writable(schema: pa.Schema, location: str) -> None:
    """Refuse (``SchemaMismatch`` naming every column and type) data Delta cannot store without loss."""
    found = problems(schema)
    if found:
        raise SchemaMismatch(f"cannot write to the Delta table {location}: " + "; ".join(found))


def _target(t: pa.DataType) -> pa.DataType:
    """The type dal converts ``t`` to before delta-rs sees it (``t`` itself when delta-rs stores it as is)."""
    if pa.types.is_unsigned_integer(t):
        return {8: pa.int16(), 16: pa.int32(), 32: pa.int64(), 64: pa.int64()}[t.bit_width]
    if pa.types.is_timestamp(t) and t.unit == "ns":
        return pa.timestamp("us", t.tz)
    if pa.types.is_decimal(t) and not pa.types.is_decimal128(t):
        return pa.decimal128(t.precision, t.scale)
    if pa.types.is_struct(t):
        fields = [t.field(i) for i in range(t.num_fields)]
        converted = [f.with_type(_target(f.type)) for f in fields]
        return t if all(a.equals(b) for a, b in zip(fields, converted, strict=True)) else pa.struct(converted)
    if pa.types.is_map(t):
        key, item = _target(t.key_type), _target(t.item_type)
        if key.equals(t.key_type) and item.equals(t.item_type):
            return t
        return pa.map_(t.key_field.with_type(key), t.item_field.with_type(item))
    if pa.types.is_dictionary(t):
        value = _target(t.value_type)
        return t if value.equals(t.value_type) else value
    if _children(t):  # lists of every kind: a converted element makes a plain list
        value = _target(t.value_type)
        return t if value.equals(t.value_type) else pa.list_(t.value_field.with_type(value))
    return t


def _target_field(f: pa.Field, current: pa.Schema | None) -> pa.Field:
    """How column ``f`` is stored: a type Delta holds, with the written type recorded when that differs
    (``dal.formats.logical``) — except in a column a table already holds without that record (written before
    dal recorded types), which keeps its stored type."""
    old = current is not None and f.name in current.names
    if old and ARROW_TYPE_KEY not in (current.field(f.name).metadata or {}):  # type: ignore[union-attr]
        return f.with_type(_target(f.type))
    if tensor_shape(f.type) is not None:
        return stored_field(f, pa.binary())
    if recorded(f.type):
        return stored_field(f, _target(f.type))
    return f.with_type(_target(f.type))


def target_schema(schema: pa.Schema, current: pa.Schema | None = None) -> pa.Schema:
    """``schema`` with the types dal converts before writing (see the module docstring) converted, the written
    types of fixed-shape tensors and unsigned columns recorded in their metadata (``current``: the table's
    stored schema, when it exists)."""
    return pa.schema([_target_field(f, current) for f in schema], metadata=schema.metadata)


def _why(source: pa.DataType, message: str) -> str:
    if "would lose data" in message or "truncat" in message.lower():
        return "a value has nanoseconds, which Delta (microseconds) cannot keep; round the column to microseconds"
    if "not in range" in message or "overflow" in message.lower():
        return "a value is above 2**63-1, the largest Delta long; store it as decimal(20, 0) or a string"
    return message


def _nested(t: pa.DataType) -> bool:
    return bool(_children(t)) or pa.types.is_struct(t)


def _sliced(arr: pa.Array) -> bool:
    """Whether a nested array (or one inside it) starts at an offset: a slice of a larger array."""
    if arr.offset:
        return True
    t = arr.type
    if pa.types.is_struct(t):
        return any(_sliced(arr.field(i)) for i in range(t.num_fields) if _nested(t.field(i).type))
    if (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t)) and _nested(arr.values.type):
        return _sliced(arr.values)
    return False


class ConformedReader:
    """A record batch stream converted to ``target_schema``, remembering the first refused value.

    Nested columns that are slices of larger arrays are copied first: delta-rs 1.x panics (and aborts the
    whole process) on a struct column with an offset that holds a map or struct (``table.slice(…)``,
    ``to_batches(max_chunksize=…)``).
    """

    def __init__(self, source: pa.RecordBatchReader, current: pa.Schema | None = None) -> None:
        self.source = source
        self.schema = target_schema(source.schema, current)
        self.error: SchemaMismatch | None = None
        nested = any(_nested(f.type) for f in source.schema)
        self.reader = (
            source
            if self.schema.equals(source.schema) and not nested
            else pa.RecordBatchReader.from_batches(self.schema, self._batches())
        )

    def _batches(self) -> Iterator[pa.RecordBatch]:
        for batch in self.source:
            columns = []
            for i, f in enumerate(self.schema):
                col = batch.column(i)
                if pa.types.is_binary(f.type) and tensor_shape(col.type) is not None:
                    try:
                        col = encode_tensor(col, f.name)
                    except SchemaMismatch as e:
                        self.error = e
                        raise
                elif not col.type.equals(f.type):
                    try:
                        col = col.cast(f.type, safe=True)
                    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                        self.error = SchemaMismatch(
                            f"cannot write column {f.name!r} ({batch.schema.field(i).type}) to Delta as {f.type}: "
                            + _why(batch.schema.field(i).type, str(e))
                        )
                        raise self.error from None
                if _nested(f.type) and _sliced(col):
                    col = pa.concat_arrays([col])  # a copy that starts at offset 0, children included
                columns.append(col)
            yield pa.RecordBatch.from_arrays(columns, schema=self.schema)


def stored(t: pa.DataType) -> pa.DataType:
    """The Delta type ``t`` is stored as, in Arrow terms: two Arrow types with equal ``stored`` values hold
    the same column of a Delta table (string/large_string, uint8/int16, timestamp units, list kinds …)."""
    t = _target(t)
    if pa.types.is_dictionary(t):
        return stored(t.value_type)
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t) or pa.types.is_fixed_size_binary(t):
        return pa.binary()
    if pa.types.is_date64(t):
        return pa.date32()
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", None if t.tz is None else "UTC")
    if pa.types.is_struct(t):
        return pa.struct([pa.field(t.field(i).name, stored(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_map(t):
        return pa.map_(stored(t.key_type), stored(t.item_type))
    if _children(t):  # lists of every kind
        return pa.list_(stored(t.value_type))
    return t


def describe_mismatch(table: pa.Schema, incoming: pa.Schema) -> tuple[list[str], list[str], list[str]]:
    """Columns (missing from incoming, new in incoming, with another type) between two Arrow schemas."""
    t = {f.name: f for f in table}
    i = {f.name: f for f in incoming}
    missing = [n for n in t if n not in i]
    new = [n for n in i if n not in t]
    changed = [f"{n} ({t[n].type} -> {i[n].type})" for n in t if n in i and not _same_type(t[n].type, i[n].type)]
    return missing, new, changed


def _same_type(a: pa.DataType, b: pa.DataType) -> bool:
    """Whether both types land in the same Delta column (string/large_string, uint8/int8, timestamp units …)."""
    return bool(a.equals(b) or stored(a).equals(stored(b)))


COLUMN_MAPPING_KEY = "delta.columnMapping.physicalName"


def physical_schema(logical: pa.Schema) -> pa.Schema:
    """``logical`` with every field (nested ones too) named by its ``delta.columnMapping.physicalName``."""
    return pa.schema([_physical_field(f) for f in logical], metadata=logical.metadata)


def _physical_field(f: pa.Field) -> pa.Field:
    meta = f.metadata or {}
    name = meta.get(COLUMN_MAPPING_KEY.encode(), f.name.encode()).decode()
    return pa.field(name, _physical_type(f.type), f.nullable, f.metadata)


def _physical_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(t):
        return pa.struct([_physical_field(t.field(i)) for i in range(t.num_fields)])
    if pa.types.is_map(t):
        return pa.map_(_physical_field(t.key_field), _physical_field(t.item_field), t.keys_sorted)
    if pa.types.is_large_list(t):
        return pa.large_list(_physical_field(t.value_field))
    if pa.types.is_list(t):
        return pa.list_(_physical_field(t.value_field))
    return t
