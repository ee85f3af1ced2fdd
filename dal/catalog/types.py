"""Frozen value objects passed between the catalog and the rest of dal (never ORM rows)."""

from __future__ import annotations

import hashlib
import json
import numbers
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from typing import Any

from dal.catalog.errors import CatalogError, InvalidName

# letters, digits, '_' and '-' in dot-separated parts: no path separators, no empty part, so no '..'
# always matched with fullmatch: '$' would also match before a final newline ("cam\n")
_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*(\.[A-Za-z0-9_][A-Za-z0-9_-]*)*")
_TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
MAX_NAME_LENGTH = 200
MAX_VERSION = 2**31 - 1  # version numbers are INTEGER columns (32-bit on PostgreSQL; the migrations)
MAX_BIGINT = 2**63 - 1  # row counts, file counts, sizes, storage versions: BIGINT columns


def row_limit(limit: int | str) -> int:
    """A LIMIT (or OFFSET) a database takes: 0 up to ``MAX_BIGINT`` (a larger one means all of them)."""
    return max(0, min(int(limit), MAX_BIGINT))


def version_numbers(given: Iterable[object]) -> list[int]:
    """The version numbers among ``given`` a catalog can hold (ints in ``0..MAX_VERSION``): one out of range
    matches no version, and never reaches the database (whose INTEGER column refuses it)."""
    return [n for n in given if isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_VERSION]


VersionRef = int | str | datetime | date | None  # a date: its midnight UTC
TAG_TEXT = re.compile(r"[A-Za-z0-9_.-]{1,100}")  # what a tag looked up can be (never send junk to the database)


def validate_name(name: object) -> str:
    """Return ``name`` if it is a valid dotted dataset name, else raise ``InvalidName``."""
    if not isinstance(name, str) or not name:
        raise InvalidName(f"invalid dataset name {name!r}: expected a non-empty string like 'weather.radar_v2'")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidName(f"invalid dataset name {name[:40]!r}...: longer than {MAX_NAME_LENGTH} characters")
    if not _NAME_RE.fullmatch(name):
        raise InvalidName(
            f"invalid dataset name {name!r}: use letters, digits, '_' and '-' in parts separated by single "
            "dots (e.g. 'weather.radar_v2'); no '/', '\\', spaces, empty parts or '..'"
        )
    return name


def validate_tag(tag: object) -> str:
    """Return ``tag`` if it is a valid tag name (not all digits, so it never shadows a version number)."""
    if not isinstance(tag, str) or len(tag) > 100 or not _TAG_RE.fullmatch(tag):
        raise InvalidName(f"invalid tag {tag!r}: use letters, digits, '_', '-' and '.' (e.g. 'prod', '2026-q3')")
    if tag.isdigit():
        raise InvalidName(f"invalid tag {tag!r}: a tag cannot be all digits (it would read as a version number)")
    if tag == "latest":
        raise InvalidName("invalid tag 'latest': it is reserved for the newest version")
    return tag


_COLUMN_RE = re.compile(r"[^\x00-\x1f\x7f]{1,1000}")  # any printable name Arrow allows, no control characters
MAX_TEXT = 100_000


def validate_text(value: object, what: str, *, optional: bool = False, max_length: int = MAX_TEXT) -> str | None:
    """``value`` if it is a string fit for the catalog (no NUL, at most ``max_length`` characters), else
    ``CatalogError``; None passes when ``optional``."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise CatalogError(f"{what} must be a string, not {type(value).__name__}")
    if "\x00" in value:
        raise CatalogError(f"{what} contains a NUL character")
    if len(value) > max_length:
        raise CatalogError(f"{what} is longer than {max_length} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:  # '\udc80': Python text no database, file name or terminal can hold
        raise CatalogError(f"{what} is not valid Unicode text: an unpaired surrogate at position {e.start}") from None
    return value


def validate_column(value: object, what: str = "time_column", *, optional: bool = True) -> str | None:
    """``value`` if it can name a column (a non-empty string without control characters), else ``InvalidName``."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or not _COLUMN_RE.fullmatch(value):
        raise InvalidName(f"invalid {what} {value!r:.80}: expected a column name without control characters")
    return value


def as_utc(ts: datetime) -> datetime:
    """``ts`` in UTC; a naive timestamp is taken as UTC (as everywhere in the catalog and dal)."""
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


def version_ref(ref: object) -> int | str | datetime | None:
    """A version reference as the catalog resolves it: None, an int (NumPy integers too), a tag or ``latest``,
    an ISO timestamp, a datetime, or a date (its midnight UTC, as the string ``'2026-04-01'`` reads). A string
    of ASCII digits becomes an int (``'²'`` and ``'٣'`` stay strings: tags never match them); ints beyond 64
    bits are kept (they match no version). Anything else is ``InvalidName``."""
    if ref is None or isinstance(ref, datetime):
        return ref
    if isinstance(ref, date):
        return datetime(ref.year, ref.month, ref.day)  # naive: UTC, as everywhere in the catalog
    if isinstance(ref, numbers.Integral) and not isinstance(ref, bool):  # np.bool_ is no Integral
        return int(ref)
    if isinstance(ref, str):
        text = ref.strip()
        if text.isascii() and text.isdigit():
            return int(text) if len(text) <= 30 else ref  # longer: no version, and int() refuses > 4300 digits
        return ref
    raise InvalidName(
        f"invalid version {ref!r}: expected a version number (int), a tag, an ISO timestamp, a datetime or a date"
    )


@dataclass(frozen=True)
class Field:
    """One column: Arrow type string, nullability, for tensor fields numpy dtype, shape and codec, and the
    column's description (a Delta column comment, Spark's ``StructField.metadata["comment"]``, Arrow field
    metadata ``comment``; None: none)."""

    name: str
    type: str
    nullable: bool = True
    dtype: str | None = None
    shape: tuple[int | None, ...] | None = None
    codec: str | None = None
    description: str | None = None

    @property
    def is_tensor(self) -> bool:
        return self.shape is not None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type, "nullable": self.nullable}
        if self.dtype is not None:
            out["dtype"] = self.dtype
        if self.shape is not None:
            out["shape"] = list(self.shape)
        if self.codec is not None:
            out["codec"] = self.codec
        if self.description is not None:
            out["description"] = self.description
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Field:
        shape = d.get("shape")
        return cls(
            name=str(d["name"]),
            type=str(d["type"]),
            nullable=bool(d.get("nullable", True)),
            dtype=d.get("dtype"),
            shape=None if shape is None else tuple(None if s is None else int(s) for s in shape),
            codec=d.get("codec"),
            description=d.get("description"),
        )

    def describe(self) -> str:
        """A short human description: the type, or dtype[shape] via codec for tensor fields."""
        if self.shape is None:
            return self.type
        if self.shape == ():
            return f"{self.dtype} ({self.codec or 'scalar'})"
        dims = ", ".join("?" if s is None else str(s) for s in self.shape)
        return f"{self.dtype}[{dims}] ({self.codec or 'raw'})"


@dataclass(frozen=True)
class Schema:
    """An ordered tuple of fields."""

    fields: tuple[Field, ...] = ()

    def __iter__(self) -> Iterator[Field]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def get(self, name: str) -> Field | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None

    def fingerprint(self) -> str:
        """A stable hash of the fields, used to share identical schemas between versions (descriptions left
        out: the catalog keeps them with each version, ``descriptions``)."""
        fields = [{k: v for k, v in f.to_dict().items() if k != "description"} for f in self.fields]
        payload = json.dumps(fields, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()

    @property
    def descriptions(self) -> dict[str, str]:
        """The columns that have a description, and it."""
        return {f.name: f.description for f in self.fields if f.description is not None}

    def described(self, descriptions: Mapping[str, Any]) -> Schema:
        """These fields with ``descriptions`` (column name -> text; other values and unknown names ignored)."""
        return Schema(
            tuple(
                replace(f, description=d) if isinstance(d := descriptions.get(f.name), str) else f for f in self.fields
            )
        )

    def to_list(self) -> list[dict[str, Any]]:
        return [f.to_dict() for f in self.fields]


@dataclass(frozen=True)
class FieldChange:
    """One field present in both schemas whose definition differs."""

    name: str
    old: Field
    new: Field


@dataclass(frozen=True)
class SchemaDiff:
    """The difference between the schemas of two versions."""

    old_version: int
    new_version: int
    added: tuple[Field, ...]
    removed: tuple[Field, ...]
    changed: tuple[FieldChange, ...]

    @property
    def is_empty(self) -> bool:
        return not (self.added or self.removed or self.changed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "old_version": self.old_version,
            "new_version": self.new_version,
            "added": [f.to_dict() for f in self.added],
            "removed": [f.to_dict() for f in self.removed],
            "changed": [{"name": c.name, "old": c.old.to_dict(), "new": c.new.to_dict()} for c in self.changed],
        }


def diff_schemas(old: Schema, new: Schema, old_version: int, new_version: int) -> SchemaDiff:
    """Compare two schemas by field name."""
    old_by_name = {f.name: f for f in old}
    new_by_name = {f.name: f for f in new}
    return SchemaDiff(
        old_version=old_version,
        new_version=new_version,
        added=tuple(f for f in new if f.name not in old_by_name),
        removed=tuple(f for f in old if f.name not in new_by_name),
        changed=tuple(
            FieldChange(f.name, old_by_name[f.name], f)
            for f in new
            if f.name in old_by_name and old_by_name[f.name] != f
        ),
    )


PartitionValues = tuple[tuple[str, str | None], ...]


# a null partition value, as Hive, Spark, Delta and Petastorm write it in directory names
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def partition_key(values: PartitionValues) -> str:
    """Hive-style path of a partition (``date=2026-01-01/hour=3``), distinct for distinct values: nulls as
    ``NULL_PARTITION``; ``%``, ``/`` and ``=`` percent-encoded, and so is a value that is the null token."""
    return "/".join(f"{k}={_key_value(v)}" for k, v in values)


def _key_value(value: str | None) -> str:
    if value is None:
        return NULL_PARTITION
    out = "".join(f"%{ord(c):02X}" if c in "%/=" else c for c in value)
    return "%5F" + out[1:] if value == NULL_PARTITION else out


@dataclass(frozen=True)
class Partition:
    """One partition present in a version: its column values (as strings) and its size."""

    values: PartitionValues
    row_count: int
    file_count: int = 0
    size_bytes: int = 0

    @property
    def key(self) -> str:
        return partition_key(self.values)

    def to_dict(self) -> dict[str, Any]:
        return {
            "partition": self.key,
            "values": dict(self.values),
            "row_count": self.row_count,
            "file_count": self.file_count,
            "size_bytes": self.size_bytes,
        }


# a label (dataset- or column-level, what DataHub and Unity Catalog call a tag; dal's tags name versions): a key,
# or key=value; a safe character set (no spaces, quotes, markup or control characters), bounded lengths
_LABEL_KEY_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,62}")
_LABEL_VALUE_RE = re.compile(r"[A-Za-z0-9_.:/@+-]{1,200}")
MAX_LABELS = 100  # on one dataset or one column


@dataclass(frozen=True)
class Label:
    """A label on a dataset (``column`` None) or on one of its columns: ``key`` or ``key=value`` (``pii``,
    ``gold``, ``owner-team=vision``). A target has one value per key: labelling ``owner-team=audio`` replaces
    ``owner-team=vision``."""

    column: str | None
    key: str
    value: str | None = None

    @property
    def text(self) -> str:
        """``key`` or ``key=value``."""
        return self.key if self.value is None else f"{self.key}={self.value}"

    def to_dict(self) -> dict[str, Any]:
        return {"column": self.column, "key": self.key, "value": self.value, "label": self.text}


def sorted_labels(labels: Iterable[Label]) -> tuple[Label, ...]:
    """Labels in the order dal shows them: the dataset's first, then by column, then by key."""
    return tuple(sorted(labels, key=lambda b: (b.column is not None, b.column or "", b.key)))


def labels_dict(labels: Iterable[Label]) -> dict[str, Any]:
    """Labels as JSON: ``{"dataset": ["gold", "owner-team=vision"], "columns": {"email": ["pii"]}}``."""
    out: dict[str, Any] = {"dataset": [], "columns": {}}
    for b in sorted_labels(labels):
        if b.column is None:
            out["dataset"].append(b.text)
        else:
            out["columns"].setdefault(b.column, []).append(b.text)
    return out


def labels_from_dict(d: Mapping[str, Any]) -> tuple[Label, ...]:
    """The labels ``labels_dict`` wrote (a ``dal serve`` answer).

    Raises:
        InvalidName: a malformed label.
    """
    found = [Label(None, *parse_label(t)) for t in d.get("dataset", ())]
    for column, texts in dict(d.get("columns", {})).items():
        found += [Label(str(column), *parse_label(t)) for t in texts]
    return sorted_labels(found)


def parse_label(text: object) -> tuple[str, str | None]:
    """``(key, value)`` of a label's text ``key`` or ``key=value``.

    Args:
        text: the label as typed (``pii``, ``owner-team=vision``).

    Returns:
        The key and the value (None for a bare key).

    Raises:
        InvalidName: not text; a key that is not 1-63 letters, digits, ``_ . : -`` (starting with a letter or
            digit); a value that is not 1-200 letters, digits, ``_ . : / @ + -``.
    """
    if not isinstance(text, str):
        raise InvalidName(f"invalid label {text!r:.80}: expected text like 'pii' or 'owner-team=vision'")
    key, sep, value = text.partition("=")
    if not _LABEL_KEY_RE.fullmatch(key):
        raise InvalidName(
            f"invalid label {text!r:.80}: a label's key is 1-63 letters, digits, '_', '.', ':' or '-' starting "
            "with a letter or digit (e.g. 'pii', 'owner-team=vision')"
        )
    if sep and not _LABEL_VALUE_RE.fullmatch(value):
        raise InvalidName(
            f"invalid label {text!r:.80}: a label's value is 1-200 letters, digits, '_', '.', ':', '/', '@', '+' "
            "or '-' (no spaces)"
        )
    return key, (value if sep else None)


@dataclass(frozen=True)
class DatasetInfo:
    """A dataset as the catalog knows it (no data I/O)."""

    name: str
    format: str
    location: str
    description: str
    owner: str
    time_column: str | None
    created_at: datetime
    updated_at: datetime
    latest_version: int | None
    properties: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "format": self.format,
            "location": self.location,
            "description": self.description,
            "owner": self.owner,
            "time_column": self.time_column,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "latest_version": self.latest_version,
            "properties": dict(self.properties),
        }


@dataclass(frozen=True)
class VersionDraft:
    """What a writer publishes; the catalog turns it into a numbered ``VersionInfo``."""

    operation: str
    schema: Schema
    row_count: int
    file_count: int = 0
    size_bytes: int = 0
    storage_version: int | None = None
    committed_at: datetime | None = None
    partition_columns: tuple[str, ...] = ()
    partitions: tuple[Partition, ...] = ()
    properties: Mapping[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class VersionInfo:
    """One immutable, numbered version of a dataset."""

    dataset: str
    number: int
    created_at: datetime
    operation: str
    row_count: int
    file_count: int
    size_bytes: int
    storage_version: int | None
    schema: Schema
    partition_columns: tuple[str, ...]
    tags: tuple[str, ...]
    properties: Mapping[str, Any] = field(default_factory=dict)

    @property
    def unavailable(self) -> str | None:
        """Why this version cannot be read any more (expired by ``dal gc``, vacuumed or log-expired by another
        tool), or None when it can."""
        reason = self.properties.get("unavailable")
        return str(reason) if reason else None

    def to_dict(self, *, with_schema: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "dataset": self.dataset,
            "version": self.number,
            "created_at": self.created_at.isoformat(),
            "operation": self.operation,
            "row_count": self.row_count,
            "file_count": self.file_count,
            "size_bytes": self.size_bytes,
            "storage_version": self.storage_version,
            "partition_columns": list(self.partition_columns),
            "tags": list(self.tags),
            "expired": self.unavailable is not None,
            "properties": dict(self.properties),
        }
        if with_schema:
            out["schema"] = self.schema.to_list()
        return out


DECLARED = "declared"  # the writer named its inputs (dal.write(inputs=...))
INFERRED = "inferred"  # dal took the reads the process made since its previous write
HOW = (DECLARED, INFERRED)


@dataclass(frozen=True)
class Input:
    """One input of a write, as the writer knows it: a dataset version read (with the filter it was read
    through), how that is known, and when it was read (names are resolved to datasets as of that time)."""

    dataset: str
    version: int
    filters: str | None = None
    how: str = INFERRED
    at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "version": self.version, "filters": self.filters, "how": self.how}


@dataclass(frozen=True)
class Edge:
    """One edge of the lineage graph as the catalog holds it: version ``version`` of ``dataset`` was written
    from version ``upstream_version`` of ``upstream`` (its current name; the name it had when read is
    ``recorded_as`` when that differs; ``upstream_id`` is None once that dataset was dropped)."""

    dataset: str
    version: int
    upstream: str
    upstream_version: int
    filters: str | None
    how: str
    recorded_as: str | None = None
    upstream_id: int | None = None
