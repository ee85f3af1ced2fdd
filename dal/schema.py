"""Arrow schemas <-> the catalog's ``Schema`` values (type strings, nullability, tensor metadata)."""

from __future__ import annotations

import pyarrow as pa

from catalog.types import Field, Schema
from dal.formats.delta_types import stored


def from_arrow(schema: pa.Schema, tensors: dict[str, Field] | None = None) -> Schema:
    """The catalog schema of an Arrow schema; ``tensors`` carries dtype/shape/codec for tensor fields."""
    tensors = tensors or {}
    out = []
    for f in schema:
        t = tensors.get(f.name)
        out.append(
            Field(
                name=f.name,
                type=str(f.type),
                nullable=f.nullable,
                dtype=t.dtype if t else None,
                shape=t.shape if t else None,
                codec=t.codec if t else None,
            )
        )
    return Schema(tuple(out))


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
