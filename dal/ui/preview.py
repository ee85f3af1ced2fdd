"""A few rows of one version for the web UI, with tensor and binary cells summarised instead of dumped."""

from __future__ import annotations

import base64
from typing import Any

from dal.catalog import Catalog
from dal.catalog.types import Field
from dal.ops.first import first_rows

MAX_ROWS = 100
MAX_TEXT = 200
MAX_THUMBNAIL_BYTES = 256 * 1024  # a larger image is summarised as text: the page stays small
# what an image cell may be shown as, by its first bytes (never by what the schema claims)
_IMAGE_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"))


def thumbnail(value: Any, field: Field | None) -> str | None:
    """A ``data:`` URI of an encoded PNG or JPEG cell (an image codec's field), for an ``<img>`` in the preview
    (the page's Content-Security-Policy allows ``data:`` images and nothing else); None for anything else."""
    if field is None or not isinstance(value, bytes | bytearray) or len(value) > MAX_THUMBNAIL_BYTES:
        return None
    codec = (field.codec or "").lower()
    if not (codec.startswith("image/") or codec in ("png", "jpeg", "jpg")):
        return None
    for magic, mime in _IMAGE_MAGIC:
        if bytes(value[: len(magic)]) == magic:
            return f"data:{mime};base64,{base64.b64encode(bytes(value)).decode('ascii')}"
    return None


def _cell(value: Any, field: Field | None) -> Any:
    if value is None:
        return None
    if field is not None and field.is_tensor and field.codec not in (None, "scalar"):
        size = len(value) if isinstance(value, bytes | bytearray) else None
        return f"<{field.describe()}" + (f", {size:,} bytes>" if size is not None else ">")
    if isinstance(value, bytes | bytearray):
        return f"<{len(value):,} bytes>"
    if isinstance(value, list):
        return f"<list of {len(value):,}>" if len(value) > 8 else [_cell(v, None) for v in value]
    if isinstance(value, dict):
        return {str(k): _cell(v, None) for k, v in list(value.items())[:16]}
    if isinstance(value, str):
        return value if len(value) <= MAX_TEXT else value[: MAX_TEXT - 1] + "…"
    if isinstance(value, bool | int | float):
        return value
    return str(value)


def preview(cat: Catalog, name: str, version: int | str | None = None, rows: int = 10) -> dict[str, Any]:
    """The first ``rows`` rows of one version (at most ``MAX_ROWS``) as JSON-ready values: tensor fields
    as ``<dtype[shape] (codec), N bytes>``, other binary as its length, long text cut; ``images``: per row, the
    PNG and JPEG cells of image fields as ``data:`` URIs (``thumbnail``)."""
    from dal import api

    rows = max(1, min(int(rows), MAX_ROWS))
    ds = api.open(name, version, catalog=cat)
    fields = {f.name: f for f in ds.version.schema}
    first = first_rows(ds, rows)  # the first file(s) that hold them, whatever the table's size
    columns = list(first.schema.names) if first is not None else list(fields)
    data = first.to_pylist() if first is not None else []
    return {
        "dataset": name,
        "version": ds.version.number,
        "columns": columns,
        "rows": [{c: _cell(r.get(c), fields.get(c)) for c in columns} for r in data[:rows]],
        "images": [
            {c: uri for c in columns if (uri := thumbnail(r.get(c), fields.get(c))) is not None} for r in data[:rows]
        ],
    }
