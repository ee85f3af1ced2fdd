"""Arrow schemas <-> the catalog's ``Schema`` values (type strings, nullability, tensor metadata)."""

from __future__ import annotations

import pyarrow as pa

from dal.catalog.types import Field, Schema


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
                description=_comment(f),
            )
        )
    return Schema(tuple(out))


def _comment(f: pa.Field) -> str | None:
    """A column's description: the ``comment`` of its Arrow field metadata (what delta-rs reads from a Delta
    column's metadata, and Spark's ``StructField.metadata["comment"]`` as dal passes it on)."""
    raw = (f.metadata or {}).get(b"comment")
    text = raw.decode("utf-8", "replace") if raw else ""
    return text or None
