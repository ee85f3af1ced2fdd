"""What a table dal wrote records about itself, so that ``dal.register`` of it into another catalog carries it:
the dataset's time column and description, and the tags each write gave its version.

Every dal write stamps them into its commit, beside the write id and the dataset's name (``stamp``, in
``WriteOptions.commit_metadata``): Delta keeps them in the commit's ``commitInfo`` (delta-rs's custom metadata,
delta-spark's ``userMetadata`` JSON), Petastorm in the version record's ``metadata``. A table written by an older
dal, or by another tool, records none of them: nothing is carried then. Readers that do not know these keys
ignore them. A table's metadata is not trusted: a tag that is not a tag name, a description the catalog would
refuse, a time column that is not a column of the newest version are left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dal.catalog.errors import CatalogError
from dal.catalog.types import DatasetInfo, VersionInfo, validate_tag, validate_text

if TYPE_CHECKING:
    from dal.catalog import Catalog

TIME_COLUMN_KEY = "dal.time_column"  # "" when the dataset has none
DESCRIPTION_KEY = "dal.description"
TAGS_KEY = "dal.tags"  # a JSON list; only when the write tagged its version


def stamp(
    existing: DatasetInfo | None, time_column: str | None, description: str | None, tags: Sequence[str]
) -> dict[str, str]:
    """The keys a write records: the dataset's time column and description as the write leaves them (its own
    arguments, else the catalog's), and the tags it gives its version."""
    column = time_column or (existing.time_column if existing is not None else None)
    text = description if description is not None else (existing.description if existing is not None else "")
    out = {TIME_COLUMN_KEY: column or "", DESCRIPTION_KEY: text or ""}
    if tags:
        out[TAGS_KEY] = json.dumps(list(tags))
    return out


@dataclass(frozen=True)
class Described:
    """What a table says about itself (``Format.described``): the newest dal write's time column (when it is
    still a column) and description; the tags dal writes gave their versions, by storage version."""

    time_column: str | None = None
    description: str | None = None
    tags: Mapping[int, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, commits: Iterable[tuple[int, Mapping[str, Any]]], columns: Sequence[str]) -> Described:
        """From each storage version's commit metadata, oldest first, and the newest version's columns."""
        time_column = description = None
        tags: dict[int, tuple[str, ...]] = {}
        for version, meta in commits:
            if isinstance(meta.get(TIME_COLUMN_KEY), str):  # a dal write's: a later one (an optimize) may lack it
                time_column = meta[TIME_COLUMN_KEY] or None
            if isinstance(meta.get(DESCRIPTION_KEY), str):
                description = _text(meta[DESCRIPTION_KEY])
            given = _tags(meta.get(TAGS_KEY))
            if given:
                tags[version] = given
        return cls(time_column if time_column in columns else None, description, tags)

    def tag(self, cat: Catalog, name: str, versions: Sequence[VersionInfo]) -> list[VersionInfo]:
        """Put the recorded tags on ``versions`` (just recorded, oldest first; a tag a later write gave again
        moves to its version); returns them as tagged."""
        tagged = [(v.number, t) for v in versions for t in self.tags.get(v.storage_version or 0, ())
                  if v.storage_version is not None]  # fmt: skip
        if not tagged:
            return list(versions)
        for number, t in tagged:
            cat.tag(name, number, t, force=True)
        numbers = {v.number for v in versions}
        return [v for v in cat.versions(name) if v.number in numbers]


def _text(value: str) -> str | None:
    try:
        return validate_text(value, "description")
    except CatalogError:  # not text the catalog takes: left out
        return None


def _tags(raw: Any) -> tuple[str, ...]:
    try:
        names = json.loads(raw) if isinstance(raw, str) else []
    except ValueError:
        return ()
    out = []
    for t in names if isinstance(names, list) else []:
        try:
            out.append(validate_tag(t))
        except CatalogError:  # not a tag name: left out
            continue
    return tuple(dict.fromkeys(out))
