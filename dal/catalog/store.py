"""The catalog API: datasets, numbered immutable versions, schemas, partitions and tags.

Every method opens its own short transaction and returns frozen values from ``dal.catalog.types``.
Backend errors are translated at this boundary into ``dal.catalog.errors``.

Why one module: it is the datasets-and-versions core of ``Catalog`` (create, publish, resolve, list, tag), whose
methods share the row locks and row conversions of one class; lineage edges (``edges``), search (``search``) and
labels (``labels``) are mixins of their own already. About a third of its lines are the Args / Returns / Raises of
its public methods, from which the Catalog reference is generated.
"""

from __future__ import annotations

import getpass
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.exc import IntegrityError

from dal.catalog.base import (
    EXPIRED_AT,
    FILES_DELETED,
    FORMAT_NAME,
    UNAVAILABLE,
    CatalogBase,
    check_properties,
    like_pattern,
)
from dal.catalog.edges import LineageEdges
from dal.catalog.errors import (
    CatalogError,
    DatasetExists,
    TagExists,
    VersionNotFound,
)
from dal.catalog.labels import CatalogLabels
from dal.catalog.locations import CatalogLocations
from dal.catalog.models import (
    DatasetRow,
    LineageRow,
    PartitionRow,
    SchemaRow,
    TagRow,
    VersionRow,
    utcnow,
)
from dal.catalog.publishing import VersionPublishing, with_descriptions
from dal.catalog.search import CatalogSearch
from dal.catalog.types import (
    DatasetInfo,
    Partition,
    Schema,
    SchemaDiff,
    VersionDraft,
    VersionInfo,
    VersionRef,
    diff_schemas,
    validate_column,
    validate_name,
    validate_tag,
    validate_text,
)

__all__ = ["EXPIRED_AT", "FILES_DELETED", "UNAVAILABLE", "Catalog", "CatalogBase", "VersionRef", "with_descriptions"]


class Catalog(LineageEdges, CatalogSearch, CatalogLabels, CatalogLocations, VersionPublishing):
    """A handle on one catalog database (SQLite file or PostgreSQL): datasets, numbered versions, schemas,
    partitions, tags (of versions), labels (of datasets and columns) and lineage edges.

    Args:
        url: any SQLAlchemy URL; default ``$DAL_CATALOG_URL`` or the embedded SQLite file.
        create: create the catalog tables when the database is empty (first use).
        must_exist: for read-only use: an SQLite catalog file that does not exist is a
            ``CatalogUnavailable`` (saying how to create one); neither the file nor its folder is created.
        pooled: PostgreSQL: keep a few connections open between operations, for a long-running server (``dal ui``);
            by default each operation connects and closes (``dal.catalog.engine``: no process holds idle connections).

    Raises:
        CatalogUnavailable: the database cannot be reached (or, ``must_exist``, the SQLite file is missing).
        CatalogOutOfDate: the database needs ``dal db upgrade``.
    """

    # -- datasets -----------------------------------------------------------------------------

    def list_datasets(self, pattern: str | None = None, *, limit: int | None = None) -> list[DatasetInfo]:
        """Datasets sorted by name.

        Args:
            pattern: a glob on the name (``weather.*``) or, without wildcards, a case-insensitive substring of the
                name or description; None: every dataset.
            limit: only the first ``limit`` (by name); None: all.

        Returns:
            The datasets, as frozen ``DatasetInfo`` values.

        Raises:
            CatalogError: ``pattern`` is not text fit for the catalog.
            CatalogUnavailable: the database cannot be reached.
        """
        validate_text(pattern, "pattern", optional=True, max_length=1000)
        stmt = select(DatasetRow).order_by(DatasetRow.name)
        if limit is not None:
            stmt = stmt.limit(max(0, int(limit)))
        if pattern:
            if any(c in pattern for c in "*?"):
                stmt = stmt.where(DatasetRow.name.like(like_pattern(pattern), escape="\\"))
            else:
                needle = f"%{like_pattern(pattern.lower())}%"
                stmt = stmt.where(
                    or_(
                        func.lower(DatasetRow.name).like(needle, escape="\\"),
                        func.lower(DatasetRow.description).like(needle, escape="\\"),
                    )
                )
        with self._read() as s:
            return [self._dataset_info(r) for r in s.scalars(stmt)]

    def latest_sizes(self, pattern: str | None = None, *, limit: int | None = None) -> dict[str, tuple[int, int]]:
        """Row count and size in bytes of the latest version of each dataset ``list_datasets`` lists (those with a
        version), in one query (``dal ls --json``).

        Args:
            pattern: as ``list_datasets``'.
            limit: as ``list_datasets``'.

        Returns:
            Dataset name -> (rows, bytes) of its latest version; datasets without a version are left out.

        Raises:
            CatalogError: ``pattern`` is not text fit for the catalog.
            CatalogUnavailable: the database cannot be reached.
        """
        validate_text(pattern, "pattern", optional=True, max_length=1000)
        ids = select(DatasetRow.id).order_by(DatasetRow.name)
        clause = self._search_clause(pattern)
        if clause is not None:
            ids = ids.where(clause)
        if limit is not None:
            ids = ids.limit(max(0, int(limit)))
        page = ids.subquery()
        latest = (VersionRow.dataset_id == DatasetRow.id) & (VersionRow.number == DatasetRow.current_version)
        stmt = (
            select(DatasetRow.name, VersionRow.row_count, VersionRow.size_bytes)
            .join(page, page.c.id == DatasetRow.id)
            .join(VersionRow, latest)
        )
        with self._read() as s:
            return {str(n): (int(r), int(b)) for n, r, b in s.execute(stmt)}

    def get_dataset(self, name: str) -> DatasetInfo:
        """The dataset called ``name``.

        Args:
            name: the dataset's dotted name.

        Returns:
            Its ``DatasetInfo``.

        Raises:
            DatasetNotFound: no dataset ``name`` (close names suggested).
            InvalidName: ``name`` is not a dataset name.
            CatalogUnavailable: the database cannot be reached.
        """
        with self._read() as s:
            return self._dataset_info(self._dataset_row(s, name))

    def create_dataset(
        self,
        name: str,
        *,
        format: str,
        location: str,
        description: str = "",
        owner: str | None = None,
        time_column: str | None = None,
        properties: Mapping[str, Any] | None = None,
        exist_ok: bool = False,
        unique_location: bool = False,
    ) -> DatasetInfo:
        """Record a new dataset (no versions yet).

        With ``exist_ok`` an existing dataset of the same format and location is returned as is. With
        A location another dataset has, holds or sits in is always refused (``dal.catalog.locations``: one
        location, one dataset); ``unique_location`` is kept for callers that passed it.

        Args:
            name: the dotted name (``weather.radar``).
            format: the storage format's name (``delta``, ``petastorm``, ``parquet``).
            location: where its data lives (a path or an object-store URL).
            description: free text.
            owner: who owns it; default: the current OS user.
            time_column: the column "as of" reads and time partitions use, if any.
            properties: user properties (string keys, JSON scalar values).
            exist_ok: return an existing dataset of this name, format and location instead of refusing.
            unique_location: ignored: another dataset's location is always refused.

        Returns:
            The new (or, ``exist_ok``, existing) dataset.

        Raises:
            InvalidName: a bad name or time column.
            DatasetExists: the name is taken (or taken with other settings); LocationTaken (a DatasetExists): the
                location is another dataset's, inside it or around it.
            CatalogError: an unknown format word, or text unfit for the catalog.
            CatalogReadOnly: this catalog role cannot write.
        """
        validate_name(name)
        validate_text(location, "location", max_length=10_000)
        validate_text(description, "description")
        validate_text(owner, "owner", optional=True, max_length=1000)
        validate_column(time_column)
        if not isinstance(format, str) or not FORMAT_NAME.fullmatch(format):
            raise CatalogError(f"unknown format {format!r}: a format is named by a short lower-case word")
        row = DatasetRow(
            name=name,
            format=format,
            location=location,
            description=description,
            owner=owner if owner is not None else getpass.getuser(),
            time_column=time_column,
            properties=dict(properties or {}),
            current_version=-1,
        )
        try:
            with self._write() as s:
                # two catalog entries over one table would each write, gc and purge it as their own (and a served
                # catalog would vend one's credentials to the other's principals): refused, whoever asks
                self._refuse_overlap(s, name, location)
                s.add(row)
                s.flush()
                return self._dataset_info(row)
        except IntegrityError as e:
            existing = self.get_dataset(name)
            if exist_ok and (existing.format, existing.location) == (format, location):
                return existing
            raise DatasetExists(f"dataset {name!r} exists already ({existing.format} at {existing.location})") from e

    def update_dataset(
        self,
        name: str,
        *,
        description: str | None = None,
        time_column: str | None = None,
        owner: str | None = None,
        properties: Mapping[str, Any] | None = None,
        clear_time_column: bool = False,
    ) -> DatasetInfo:
        """Change a dataset's description, time column, owner or properties (its versions are untouched).

        Args:
            name: the dataset.
            description: the new description; None: unchanged.
            time_column: the new time column; None: unchanged.
            owner: the new owner; None: unchanged.
            properties: merged into the dataset's: a key set to ``None`` is removed.
            clear_time_column: the dataset has no time column any more (its newest schema lost it).

        Returns:
            The dataset as it is now.

        Raises:
            DatasetNotFound: no dataset ``name`` (close names suggested).
            InvalidName: ``name`` is not a dataset name.
            CatalogError: text unfit for the catalog, or properties that are not string keys and JSON scalars.
            CatalogReadOnly: this catalog role cannot write.
        """
        validate_text(description, "description", optional=True)
        validate_column(time_column)
        validate_text(owner, "owner", optional=True, max_length=200)
        props = check_properties(properties)
        with self._write() as s:
            row = self._dataset_row(s, name, for_update=True)
            if description is not None:
                row.description = description
            if time_column is not None:
                row.time_column = time_column
            elif clear_time_column:
                row.time_column = None
            if owner is not None:
                row.owner = owner
            if props:
                merged = dict(row.properties or {})
                for k, v in props.items():
                    if v is None:
                        merged.pop(k, None)
                    else:
                        merged[k] = v
                row.properties = merged
            row.updated_at = utcnow()
            return self._dataset_info(row)

    def rename_dataset(self, name: str, new_name: str) -> DatasetInfo:
        """Give a dataset another name; its versions, tags, labels and location stay as they are (the old name is
        kept in its ``former_names`` property: lineage recorded before names it).

        Args:
            name: the dataset's current name.
            new_name: the name it gets.

        Returns:
            The renamed dataset.

        Raises:
            DatasetNotFound: no dataset ``name`` (close names suggested).
            InvalidName: ``name`` is not a dataset name.
            DatasetExists: ``new_name`` is taken.
            CatalogReadOnly: this catalog role cannot write.
        """
        validate_name(new_name)
        try:
            with self._write() as s:
                row = self._dataset_row(s, name, for_update=True)
                if new_name == name:
                    return self._dataset_info(row)
                now = utcnow()
                # the names it had, and until when: lineage records written before name the old one
                former = (row.properties or {}).get("former_names")
                former = [*(former if isinstance(former, list) else []), {"name": name, "until": now.isoformat()}]
                row.properties = {**(row.properties or {}), "former_names": former}
                row.name = new_name
                row.updated_at = now
                s.flush()
                return self._dataset_info(row)
        except IntegrityError as e:
            raise DatasetExists(f"cannot rename {name!r} to {new_name!r}: a dataset called {new_name!r} exists") from e

    def delete_dataset(self, name: str) -> None:
        """Remove a dataset, all its versions, tags and labels from the catalog (the data files are not touched;
        ``dal.lifecycle.drop`` is the checked entry point). Lineage edges of what was built from it keep its name.

        Args:
            name: the dataset.

        Raises:
            DatasetNotFound: no dataset ``name`` (close names suggested).
            InvalidName: ``name`` is not a dataset name.
            CatalogReadOnly: this catalog role cannot write.
        """
        with self._write() as s:
            row = self._dataset_row(s, name, for_update=True)
            ids = select(VersionRow.id).where(VersionRow.dataset_id == row.id)
            # explicit, not only ON DELETE CASCADE: a PostgreSQL or SQLite catalog created without enforced
            # foreign keys must not keep tags and versions of a dropped dataset
            s.execute(delete(TagRow).where(TagRow.dataset_id == row.id))
            self._drop_labels(s, row.id)
            s.execute(delete(PartitionRow).where(PartitionRow.version_id.in_(ids)))
            s.execute(delete(LineageRow).where(LineageRow.version_id.in_(ids)))
            # what was built from it keeps its edges, by the recorded name: the dataset is gone (and a new one
            # taking its name must not inherit them)
            s.execute(
                update(LineageRow).where(LineageRow.upstream_dataset_id == row.id).values(upstream_dataset_id=None)
            )
            s.execute(delete(VersionRow).where(VersionRow.dataset_id == row.id))
            s.execute(delete(SchemaRow).where(SchemaRow.dataset_id == row.id))
            s.delete(row)

    def expire_versions(self, name: str, numbers: Sequence[int], reason: str) -> list[VersionInfo]:
        """Mark versions as expired (their data was or is being deleted): they stay in the history, and
        opening one says ``reason``. Versions already unavailable are left as they are.

        Args:
            name: the dataset.
            numbers: the version numbers to mark (numbers it does not have are ignored).
            reason: what opening one of them says.

        Returns:
            The versions marked now, oldest first.

        Raises:
            DatasetNotFound: no dataset ``name`` (close names suggested).
            InvalidName: ``name`` is not a dataset name.
            CatalogError: ``reason`` is not text fit for the catalog.
        """
        validate_text(reason, "reason", max_length=2000)
        out = []
        with self._write() as s:
            ds = self._dataset_row(s, name, for_update=True)
            rows = s.scalars(
                select(VersionRow)
                .where(VersionRow.dataset_id == ds.id, VersionRow.number.in_(list(numbers)))
                .order_by(VersionRow.number)
            ).all()
            for r in rows:
                props = dict(r.properties or {})
                if props.get(UNAVAILABLE):
                    continue
                props[UNAVAILABLE] = reason
                props[EXPIRED_AT] = utcnow().isoformat()
                r.properties = props
                out.append(r)
            s.flush()
            return [self._version_info(name, r) for r in out]

    def annotate_versions(self, name: str, numbers: Sequence[int], key: str, value: Any) -> None:
        """Set one key of several versions' properties in one transaction (gc: their files are deleted).

        Args:
            name: the dataset.
            numbers: the version numbers (numbers it does not have are ignored).
            key: the property's name.
            value: a JSON scalar.

        Raises:
            DatasetNotFound: no dataset ``name`` (close names suggested).
            InvalidName: ``name`` is not a dataset name.
            CatalogError: a key or value unfit for properties.
        """
        check_properties({key: value})
        with self._write() as s:
            ds = self._dataset_row(s, name, for_update=True)
            rows = s.scalars(
                select(VersionRow).where(VersionRow.dataset_id == ds.id, VersionRow.number.in_(list(numbers)))
            ).all()
            for r in rows:
                r.properties = {**(r.properties or {}), key: value}

    def annotate_version(self, name: str, number: int, key: str, value: Any) -> VersionInfo:
        """Set one key of a version's properties (dal's lineage record); the version's data is untouched.

        Args:
            name: the dataset.
            number: the version number.
            key: the property's name.
            value: its JSON value.

        Returns:
            The version as it is now.

        Raises:
            DatasetNotFound: no dataset ``name`` (close names suggested).
            InvalidName: ``name`` is not a dataset name.
            VersionNotFound: the dataset has no version ``number``.
        """
        with self._write() as s:
            ds = self._dataset_row(s, name, for_update=True)
            row = s.scalar(select(VersionRow).where(VersionRow.dataset_id == ds.id, VersionRow.number == number))
            if row is None:
                raise VersionNotFound(f"{name} has no version {number}")
            row.properties = {**(row.properties or {}), key: value}
            s.flush()
            return self._version_info(name, row)

    # -- versions -----------------------------------------------------------------------------

    def publish(self, name: str, draft: VersionDraft) -> VersionInfo:
        """Record the next version of ``name``; numbers are gap-free even with concurrent publishers
        (``publish_many`` with one draft: one implementation of the rules).

        Args:
            name: the dataset.
            draft: the version.

        Args:
            name: the dataset.
            draft: what the writer committed: operation, schema (with column descriptions), counts, storage
                version, commit time, partitions, properties and tags to put on the new version.

        Returns:
            The new version.

        Raises:
            DatasetNotFound: no dataset ``name`` (close names suggested).
            InvalidName: ``name`` is not a dataset name.
            TagExists: a requested tag is on another version.
            VersionConflict: ``draft.storage_version`` is not newer than every recorded storage version.
            CatalogError: negative counts, partition columns not in the schema, or text unfit for the catalog.
            CatalogReadOnly: this catalog role cannot write.
        """
        return self.publish_many(name, [draft])[0]

    def versions(self, name: str, *, limit: int | None = None) -> list[VersionInfo]:
        """The history of ``name``, oldest first.

        Plain column queries (no ORM objects): the versions, their tags, and each distinct schema once — a
        history of hundreds of versions usually shares a handful of schemas.

        Args:
            name: the dataset.
            limit: only the newest ``limit`` versions (still oldest first); None: all.

        Returns:
            The versions with their schemas and tags.

        Raises:
            DatasetNotFound: no dataset ``name`` (close names suggested).
            InvalidName: ``name`` is not a dataset name.
        """
        v = VersionRow.__table__.c
        columns = (v.id, v.number, v.created_at, v.operation, v.row_count, v.file_count, v.size_bytes,
                   v.storage_version, v.schema_id, v.partition_columns, v.properties)  # fmt: skip
        with self._read() as s:
            ds = self._dataset_row(s, name)
            stmt = select(*columns).where(v.dataset_id == ds.id)
            if limit is None:
                rows = s.execute(stmt.order_by(v.number)).all()
            else:
                rows = s.execute(stmt.order_by(v.number.desc()).limit(max(0, int(limit)))).all()[::-1]
            tags: dict[int, list[str]] = {}
            if rows:
                ids = [r.id for r in rows]
                found = s.execute(
                    select(TagRow.version_id, TagRow.name).where(TagRow.dataset_id == ds.id).order_by(TagRow.name)
                )
                wanted = set(ids)
                for version_id, tag in found:
                    if version_id in wanted:
                        tags.setdefault(version_id, []).append(tag)
            schemas = {sid: self._schema(s.get_one(SchemaRow, sid)) for sid in dict.fromkeys(r.schema_id for r in rows)}
            return [self._version_info(name, r, schemas[r.schema_id], tags.get(r.id, ())) for r in rows]

    def version(self, name: str, ref: VersionRef = None) -> VersionInfo:
        """Resolve ``ref`` to one version of ``name``.

        ``ref`` is ``None``/``"latest"`` (the newest), a version number (an int, NumPy's too, or digits), a tag,
        or a datetime / date / ISO-8601 string (the version current at that time; naive times and dates are
        UTC, a date its midnight). A string is a tag when a tag of exactly that text exists, else read as a
        time: a tag named ``2026-04-01`` wins over the as-of reading of that string; pass a ``date`` or
        ``datetime`` to mean the time.

        Args:
            name: the dataset.
            ref: the version reference (above).

        Returns:
            The version, with its schema and tags.

        Raises:
            DatasetNotFound: no dataset ``name`` (close names suggested).
            InvalidName: ``name`` is not a dataset name.
            VersionNotFound: no such number or tag, the time is before the first version or in the future, or
                the dataset has no version yet.
        """
        with self._read() as s:
            ds = self._dataset_row(s, name)
            return self._version_info(name, self._resolve(s, ds, ref))

    def schema(self, name: str, ref: VersionRef = None) -> Schema:
        """The schema of one version.

        Args:
            name: the dataset.
            ref: a version reference, as ``version``'s (default: the newest).

        Returns:
            Its ``Schema`` (column descriptions included).

        Raises:
            DatasetNotFound: no dataset ``name`` (close names suggested).
            InvalidName: ``name`` is not a dataset name.
            VersionNotFound: ``ref`` names no version.
        """
        return self.version(name, ref).schema

    def diff(self, name: str, old: VersionRef, new: VersionRef) -> SchemaDiff:
        """Fields added, removed and changed from version ``old`` to version ``new``.

        Args:
            name: the dataset.
            old: a version reference, as ``version``'s.
            new: a version reference, as ``version``'s.

        Returns:
            The ``SchemaDiff`` (empty when only descriptions differ).

        Raises:
            DatasetNotFound: no dataset ``name`` (close names suggested).
            InvalidName: ``name`` is not a dataset name.
            VersionNotFound: ``old`` or ``new`` names no version.
        """
        with self._read() as s:
            ds = self._dataset_row(s, name)
            a, b = self._resolve(s, ds, old), self._resolve(s, ds, new)
            return diff_schemas(self._schema(a.schema), self._schema(b.schema), a.number, b.number)

    def partitions(self, name: str, ref: VersionRef = None) -> tuple[Partition, ...]:
        """The partitions present in one version, sorted by their path.

        Args:
            name: the dataset.
            ref: a version reference, as ``version``'s (default: the newest).

        Returns:
            Each partition's values with its rows, files and bytes.

        Raises:
            DatasetNotFound: no dataset ``name`` (close names suggested).
            InvalidName: ``name`` is not a dataset name.
            VersionNotFound: ``ref`` names no version.
        """
        with self._read() as s:
            ds = self._dataset_row(s, name)
            v = self._resolve(s, ds, ref)
            rows = s.scalars(select(PartitionRow).where(PartitionRow.version_id == v.id).order_by(PartitionRow.key))
            return tuple(
                Partition(
                    values=tuple((str(k), None if val is None else str(val)) for k, val in r.values),
                    row_count=r.row_count,
                    file_count=r.file_count,
                    size_bytes=r.size_bytes,
                )
                for r in rows
            )

    # -- tags -----------------------------------------------------------------------------------

    def tag(self, name: str, ref: VersionRef, tag: str, *, force: bool = False) -> VersionInfo:
        """Put ``tag`` on a version. A tag names one version (git-like; dataset and column labels are
        ``label``); moving it needs ``force=True``.

        Args:
            name: the dataset.
            ref: the version, as ``version``'s reference.
            tag: letters, digits, ``_ - .``; not all digits, not ``latest``.
            force: move the tag from the version it is on.

        Returns:
            The tagged version, with its tags.

        Raises:
            DatasetNotFound: no dataset ``name`` (close names suggested).
            InvalidName: ``name`` is not a dataset name.
            InvalidName: a bad tag.
            VersionNotFound: ``ref`` names no version.
            TagExists: the tag is on another version and ``force`` is false.
            CatalogReadOnly: this catalog role cannot write.
        """
        validate_tag(tag)
        with self._write() as s:
            ds = self._dataset_row(s, name, for_update=True)
            target = self._resolve(s, ds, ref)
            existing = s.scalar(select(TagRow).where(TagRow.dataset_id == ds.id, TagRow.name == tag))
            if existing is not None and existing.version_id != target.id:
                if not force:
                    held = s.get_one(VersionRow, existing.version_id).number
                    raise TagExists(f"{name}: tag {tag!r} is on version {held}; use --force to move it")
                existing.version_id = target.id
            elif existing is None:
                s.add(TagRow(dataset_id=ds.id, name=tag, version_id=target.id))
            s.flush()
            s.refresh(target, ["tags"])
            return self._version_info(name, target)

    def tags(self, name: str) -> dict[str, int]:
        """Every tag of ``name`` and the version number it names.

        Args:
            name: the dataset.

        Returns:
            Tag -> version number, by tag.

        Raises:
            DatasetNotFound: no dataset ``name`` (close names suggested).
            InvalidName: ``name`` is not a dataset name.
        """
        with self._read() as s:
            ds = self._dataset_row(s, name)
            rows = s.execute(
                select(TagRow.name, VersionRow.number)
                .join(VersionRow, VersionRow.id == TagRow.version_id)
                .where(TagRow.dataset_id == ds.id)
                .order_by(TagRow.name)
            )
            return {t: n for t, n in rows}

    def untag(self, name: str, tag: str) -> None:
        """Remove ``tag`` from ``name`` (the version stays).

        Args:
            name: the dataset.
            tag: the tag.

        Raises:
            DatasetNotFound: no dataset ``name`` (close names suggested).
            InvalidName: ``name`` is not a dataset name.
            InvalidName: a bad tag.
            VersionNotFound: the dataset has no such tag (close tags suggested).
            CatalogReadOnly: this catalog role cannot write.
        """
        validate_tag(tag)
        with self._write() as s:
            ds = self._dataset_row(s, name, for_update=True)
            row = s.scalar(select(TagRow).where(TagRow.dataset_id == ds.id, TagRow.name == tag))
            if row is None:
                raise VersionNotFound(f"tag {tag!r} of {name}", tag, self._tags(s, ds.id))
            s.delete(row)
