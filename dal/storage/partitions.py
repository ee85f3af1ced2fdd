"""Hive-style partitions, as every format and engine here spells them: ``col=value/`` directories (values
percent-encoded, null as Hive's ``__HIVE_DEFAULT_PARTITION__``), partition values as strings (as Delta's log
writes them), a table split by partition value, and per-partition totals for the catalog."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from typing import Any
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.compute as pc

from dal.catalog.types import NULL_PARTITION, Partition
from dal.errors import DalError

PartitionValues = tuple[tuple[str, str | None], ...]
# a dataset property: the types of a plain directory's partition columns, where its files do not record them
# (JSON: column -> Arrow type name), given to dal.register or taken from a Hive table's partition keys
PARTITION_TYPES_KEY = "dal.partition_types"
# the Arrow type of each Hive partition key type (decimal(p,s), varchar(n) and char(n) are parsed)
HIVE_TYPES = {
    "tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(), "integer": pa.int32(), "bigint": pa.int64(),
    "float": pa.float32(), "double": pa.float64(), "boolean": pa.bool_(), "string": pa.string(),
    "date": pa.date32(), "timestamp": pa.timestamp("us"), "binary": pa.binary(),
}  # fmt: skip

__all__ = ["NULL_PARTITION", "PartitionValues"]


_DECIMAL = re.compile(r"decimal(?:128|256)?\((\d+), *(-?\d+)\)")
_ZONED = re.compile(r"timestamp\[(s|ms|us|ns), *tz=(.+)\]")


def arrow_type(name: str) -> pa.DataType:
    """The Arrow type ``name`` names (``str(pa.DataType)`` or an alias such as ``date32``), else DalError."""
    if m := _DECIMAL.fullmatch(name):
        precision, scale = int(m.group(1)), int(m.group(2))
        return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
    if m := _ZONED.fullmatch(name):
        return pa.timestamp(m.group(1), tz=m.group(2))
    try:
        return pa.type_for_alias(name)
    except (ValueError, KeyError):
        raise DalError(f"{name!r} is not an Arrow type name") from None


def check_partition_types(types: object) -> str:
    """``types`` (column -> Arrow type name, e.g. ``{"date": "date32", "hour": "int32"}``) as the JSON text of
    the ``PARTITION_TYPES_KEY`` property.

    Raises:
        DalError: not a mapping of column names to the names of types a partition value can have."""
    if not isinstance(types, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in types.items()):
        raise DalError(f"partition_types must map column names to Arrow type names, not {types!r:.100}")
    out = {}
    for column, name in types.items():
        try:
            typ = arrow_type(name)
        except DalError:
            raise DalError(f"partition_types: {name!r} ({column}) is not an Arrow type name") from None
        if not _partition_typed(typ):
            raise DalError(f"partition_types: a partition value cannot be {typ} ({column})")
        out[column] = str(typ)
    return json.dumps(out, sort_keys=True)


def _partition_typed(t: pa.DataType) -> bool:
    return any(
        f(t)
        for f in (pa.types.is_integer, pa.types.is_floating, pa.types.is_boolean, pa.types.is_string,
                  pa.types.is_large_string, pa.types.is_date, pa.types.is_timestamp, pa.types.is_decimal,
                  pa.types.is_binary)
    )  # fmt: skip


def hive_partition_type(hive: str) -> pa.DataType | None:
    """The Arrow type of a Hive partition key type (None: one dal does not know)."""
    t = hive.strip().lower()
    if t in HIVE_TYPES:
        return HIVE_TYPES[t]
    if re.fullmatch(r"(varchar|char)\(\d+\)", t):
        return pa.string()
    if m := re.fullmatch(r"decimal\((\d+), *(\d+)\)", t):
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    return None


def declared_types(text: object) -> dict[str, pa.DataType]:
    """The types a ``PARTITION_TYPES_KEY`` property gives (nothing for text dal cannot read)."""
    try:
        d = json.loads(text) if isinstance(text, str) else {}
        return {str(k): arrow_type(str(v)) for k, v in d.items()} if isinstance(d, dict) else {}
    except (ValueError, DalError):
        return {}


def infer_type(values: Iterable[str | None]) -> pa.DataType:
    """A partition column's type from its directory values alone, as pyarrow's hive discovery reads them:
    integers int64, anything else (dates included: a name cannot say it is one) a string."""
    present = [v for v in values if v is not None]
    return pa.int64() if all(v.lstrip("-").isdigit() for v in present) else pa.string()


def partition_string(value: Any) -> str | None:
    """A partition value as Delta's log writes it (dates ISO, timestamps 'YYYY-MM-DD HH:MM:SS.ffffff')."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.replace(tzinfo=None).isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def partition_dir(values: Sequence[tuple[str, str | None]]) -> str:
    """The hive-style directory of a partition: ``col=value/…``, values percent-encoded, nulls as Hive writes them
    (a value that is the null token itself is encoded, so it reads back as that string, not as null)."""
    return "/".join(f"{c}={_escape(v)}" for c, v in values)


def _escape(value: str | None) -> str:
    if value is None:
        return NULL_PARTITION
    if value == NULL_PARTITION:
        return "%5F" + quote(value[1:], safe="")
    return quote(value, safe="")


def parse_partition_dir(relpath: str) -> PartitionValues:
    """The partition values of a file's relative path (the inverse of :func:`partition_dir`)."""
    out = []
    for part in relpath.split("/")[:-1]:
        if "=" in part:
            k, v = part.split("=", 1)
            out.append((k, None if v == NULL_PARTITION else unquote(v)))
    return tuple(out)


def split_by_partition(table: pa.Table, partition_by: Sequence[str]) -> list[tuple[PartitionValues, pa.Table]]:
    """``table``'s rows grouped by the values of ``partition_by`` (all of them, in first-seen order of the
    distinct combinations; partition columns kept), each with its values as partition strings."""
    if not partition_by:
        return [((), table)]
    out = []
    for combo in table.select(list(partition_by)).group_by(list(partition_by)).aggregate([]).to_pylist():
        mask = None
        for c in partition_by:
            column = table[c]
            term = pc.is_null(column) if combo[c] is None else pc.equal(column, pa.scalar(combo[c], column.type))
            mask = term if mask is None else pc.and_(mask, term)
        out.append((tuple((c, partition_string(combo[c])) for c in partition_by), table.filter(mask)))
    return out


def blank_as_null(values: PartitionValues) -> PartitionValues:
    """Partition values with an empty string as null: Delta readers (delta-rs, Spark, dal) read an empty
    partition value as null, and Spark and Hive write it where nulls go (Hive cannot see a ``col=`` directory)."""
    return tuple((c, None if v == "" else v) for c, v in values)


def blank_partitions_as_null(data: pa.RecordBatchReader, parts: Sequence[str]) -> pa.RecordBatchReader:
    """``data`` with the empty strings of its nullable string partition columns ``parts`` made null (see
    :func:`blank_as_null`), so a writer puts those rows in the null partition's directory."""
    strings = (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view)
    columns = [
        data.schema.get_field_index(f.name)
        for f in data.schema
        if f.name in parts and f.nullable and any(test(f.type) for test in strings)
    ]
    if not columns:
        return data

    def batches() -> Iterable[pa.RecordBatch]:
        for batch in data:
            arrays = list(batch.columns)
            for i in columns:
                blank = pc.equal(arrays[i], pa.scalar("", arrays[i].type))
                arrays[i] = pc.if_else(blank, pa.scalar(None, arrays[i].type), arrays[i])
            yield pa.RecordBatch.from_arrays(arrays, schema=batch.schema)

    return pa.RecordBatchReader.from_batches(data.schema, batches())


def partition_totals(files: Iterable[tuple[PartitionValues, int, int]]) -> tuple[Partition, ...]:
    """One ``Partition`` per distinct value combination of ``(values, rows, bytes)`` file descriptions:
    rows, files and bytes summed, ordered by the values' text."""
    acc: dict[PartitionValues, list[int]] = defaultdict(lambda: [0, 0, 0])
    for values, rows, size in files:
        a = acc[values]
        a[0], a[1], a[2] = a[0] + rows, a[1] + 1, a[2] + size
    return tuple(Partition(k, r, f, b) for k, (r, f, b) in sorted(acc.items(), key=lambda kv: str(kv[0])))
