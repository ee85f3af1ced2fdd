"""Lineage edges in the catalog: one row per input of a version, indexed both ways (upstream and downstream)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Text, cast, delete, or_, select
from sqlalchemy.orm import Session

from dal.catalog.base import CatalogBase, like_pattern
from dal.catalog.errors import (
    CatalogError,
    VersionNotFound,
)
from dal.catalog.models import (
    DatasetRow,
    LineageRow,
    VersionRow,
    utcnow,
)
from dal.catalog.types import (
    HOW,
    MAX_VERSION,
    Edge,
    Input,
    VersionInfo,
    as_utc,
    validate_name,
)


class LineageEdges(CatalogBase):
    """Recording and querying the lineage edges of versions (part of ``Catalog``)."""

    def record_lineage(
        self, name: str, number: int, key: str, record: Mapping[str, Any], inputs: Sequence[Input]
    ) -> VersionInfo:
        """Store the lineage of one version in one transaction: ``record`` under ``key`` of its properties and an
        edge per input (repeats of a dataset, version and filter once). Each input's name is resolved to the
        dataset that held it when it was read (``Input.at``; renames are followed), or to none (dropped since).
        Recording again replaces the version's edges.

        Args:
            name: the dataset written.
            number: its version.
            key: the property the record goes under (``lineage``).
            record: the lineage record (who, when, what program).
            inputs: the dataset versions read, each ``declared`` or ``inferred``.

        Returns:
            The version as it is now.

        Raises:
            DatasetNotFound: no dataset ``name`` (close names suggested).
            InvalidName: ``name`` is not a dataset name.
            VersionNotFound: the dataset has no version ``number``.
            CatalogError: an input with an unknown ``how`` or a bad version number.
        """
        for i in inputs:
            if i.how not in HOW:
                raise CatalogError(f"lineage input how must be one of {', '.join(HOW)}, not {i.how!r}")
            if isinstance(i.version, bool) or not isinstance(i.version, int) or not 0 <= i.version <= MAX_VERSION:
                raise CatalogError(f"lineage input version must be a version number, not {i.version!r}")
            validate_name(i.dataset)
        with self._write() as s:
            ds = self._dataset_row(s, name, for_update=True)
            row = self._numbered(s, ds.id, number)
            if row is None:
                raise VersionNotFound(f"{name} has no version {str(number)[:40]}")
            row.properties = {**(row.properties or {}), key: dict(record)}
            s.execute(delete(LineageRow).where(LineageRow.version_id == row.id))
            seen: set[tuple[str, int, str | None]] = set()
            holders: dict[tuple[str, datetime | None], int | None] = {}
            now = utcnow()
            for i in inputs:
                if (i.dataset, i.version, i.filters) in seen:
                    continue
                seen.add((i.dataset, i.version, i.filters))
                when = as_utc(i.at) if i.at is not None else now
                if (i.dataset, when) not in holders:
                    holders[(i.dataset, when)] = self._holder(s, i.dataset, when)
                s.add(
                    LineageRow(
                        version_id=row.id,
                        upstream_dataset_id=holders[(i.dataset, when)],
                        upstream_name=i.dataset,
                        upstream_version=i.version,
                        filters=i.filters,
                        how=i.how,
                    )
                )
            s.flush()
            return self._version_info(name, row)

    @staticmethod
    def _holder(s: Session, name: str, when: datetime) -> int | None:
        """The id of the dataset called ``name`` at ``when``: one that has given that name up since (recorded by
        ``rename_dataset`` in ``former_names``) owned it until then; the dataset called so now owns it from the
        time it took it. None when no dataset held it then (dropped)."""
        mentions = "%" + like_pattern(f'"{name}"') + "%"  # names hold no LIKE or JSON metacharacters but '_'
        rows = s.execute(
            select(DatasetRow.id, DatasetRow.name, DatasetRow.properties).where(
                or_(DatasetRow.name == name, cast(DatasetRow.properties, Text).like(mentions, escape="\\"))
            )
        ).all()
        current: tuple[int, datetime | None] | None = None
        for ds_id, ds_name, props in rows:
            start: datetime | None = None
            former = (props or {}).get("former_names")
            for f in former if isinstance(former, list) else []:
                try:
                    old, until = f["name"], as_utc(datetime.fromisoformat(f["until"]))
                except (TypeError, KeyError, ValueError):
                    continue  # not written by rename (a hand-edited property): ignore
                if old == name and (start is None or when >= start) and when < until:
                    return int(ds_id)
                start = until
            if ds_name == name:
                current = (int(ds_id), start)
        if current is not None and (current[1] is None or when >= current[1]):
            return current[0]
        return None

    def upstream(self, name: str, number: int) -> list[Edge]:
        """The recorded inputs of version ``number`` of ``name``, in the order recorded; each names the
        dataset by its current name (``recorded_as``: the name it was read under, when different).

        Args:
            name: the dataset.
            number: the version.

        Returns:
            Its upstream edges.

        Raises:
            DatasetNotFound: no dataset ``name`` (close names suggested).
            InvalidName: ``name`` is not a dataset name.
            VersionNotFound: the dataset has no version ``number``.
        """
        with self._read() as s:
            ds = self._dataset_row(s, name)
            found = self._numbered(s, ds.id, number)
            if found is None:
                raise VersionNotFound(f"{name} has no version {str(number)[:40]}")
            vid = found.id
            rows = s.execute(
                select(LineageRow, DatasetRow.name)
                .outerjoin(DatasetRow, DatasetRow.id == LineageRow.upstream_dataset_id)
                .where(LineageRow.version_id == vid)
                .order_by(LineageRow.id)
            ).all()
            return [
                Edge(
                    dataset=name,
                    version=number,
                    upstream=current or r.upstream_name,
                    upstream_version=r.upstream_version,
                    filters=r.filters,
                    how=r.how,
                    recorded_as=r.upstream_name if current is not None and current != r.upstream_name else None,
                    upstream_id=r.upstream_dataset_id,
                )
                for r, current in rows
            ]

    def downstream(self, name: str, number: int, *, limit: int = 1000) -> list[Edge]:
        """The edges from version ``number`` of ``name`` to the versions built from it (by dataset name and
        version), an indexed lookup (the dataset id and version number).

        Args:
            name: the dataset.
            number: the version.
            limit: at most this many edges (up to 100,000).

        Returns:
            The downstream edges.

        Raises:
            DatasetNotFound: no dataset ``name`` (close names suggested).
            InvalidName: ``name`` is not a dataset name.
        """
        limit = max(0, min(int(limit), 100_000))
        with self._read() as s:
            ds = self._dataset_row(s, name)
            if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number <= MAX_VERSION:
                return []  # no version has it (and the database's column would refuse it)
            rows = s.execute(
                select(DatasetRow.name, VersionRow.number, LineageRow)
                .join(VersionRow, VersionRow.id == LineageRow.version_id)
                .join(DatasetRow, DatasetRow.id == VersionRow.dataset_id)
                .where(LineageRow.upstream_dataset_id == ds.id, LineageRow.upstream_version == number)
                .order_by(DatasetRow.name, VersionRow.number, LineageRow.id)
                .limit(limit)
            ).all()
            return [
                Edge(
                    dataset=d,
                    version=n,
                    upstream=name,
                    upstream_version=number,
                    filters=r.filters,
                    how=r.how,
                    recorded_as=r.upstream_name if r.upstream_name != name else None,
                    upstream_id=ds.id,
                )
                for d, n, r in rows
            ]
