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
            )
        )
    return Schema(tuple(out))
