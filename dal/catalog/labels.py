"""Labels of datasets and of their columns (``pii``, ``gold``, ``owner-team=vision``): what DataHub, Unity Catalog
and OpenMetadata call tags. dal's *tags* name versions (``dal tag NAME prod --version 3``, like git tags), so
these are *labels*: they describe the dataset, whichever version is read."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from dal.catalog.base import CatalogBase
from dal.catalog.errors import CatalogError, InvalidName, LabelNotFound
from dal.catalog.models import DatasetRow, LabelRow, SchemaFieldRow, VersionRow
from dal.catalog.types import MAX_LABELS, Label, parse_label, sorted_labels, validate_column

MAX_LABEL_COLUMN = 200  # characters of a column name a label can be put on


def label_value(row: LabelRow) -> Label:
    """The frozen value of a label row."""
    key, value = parse_label(row.text)
    return Label(column=row.column_name or None, key=key, value=value)


class CatalogLabels(CatalogBase):
    """Putting labels on datasets and columns, removing and listing them (part of ``Catalog``)."""

    @staticmethod
    def _label_target(s: Session, ds: DatasetRow, column: str | None) -> str:
        """The stored column of a label: "" for the dataset, else a column of the dataset's newest version.

        Raises:
            InvalidName: the column is not in the newest version's schema (or the dataset has no version yet).
        """
        if column is None:
            return ""
        validate_column(column, "column", optional=False)
        if len(column) > MAX_LABEL_COLUMN:
            raise InvalidName(
                f"column {column[:40]!r}...: labels go on columns of at most {MAX_LABEL_COLUMN} characters"
            )
        names = s.scalars(
            select(SchemaFieldRow.name)
            .join(VersionRow, VersionRow.schema_id == SchemaFieldRow.schema_id)
            .where(VersionRow.dataset_id == ds.id, VersionRow.number == ds.current_version)
            .order_by(SchemaFieldRow.position)
        ).all()
        if column not in names:
            where = f"its columns are {', '.join(names)}" if names else "it has no version yet"
            raise InvalidName(f"{ds.name} has no column {column!r} in its newest version ({where})")
        return column

    def label(self, name: str, label: str, *, column: str | None = None) -> tuple[Label, ...]:
        """Put ``label`` on dataset ``name`` or on one of its columns; a label with the same key is replaced
        (``owner-team=audio`` replaces ``owner-team=vision``). Versions are untouched.

        Args:
            name: the dataset.
            label: ``key`` or ``key=value`` (``parse_label``'s rules).
            column: a column of the dataset's newest version; None labels the dataset.

        Returns:
            Every label of the dataset afterwards (``labels``).

        Raises:
            DatasetNotFound: no such dataset. InvalidName: a malformed label, or no such column.
            CatalogError: the target has ``MAX_LABELS`` labels already.
        """
        key, _value = parse_label(label)
        with self._write() as s:
            ds = self._dataset_row(s, name, for_update=True)
            target = self._label_target(s, ds, column)
            where = (LabelRow.dataset_id == ds.id, LabelRow.column_name == target)
            existing = s.scalar(select(LabelRow).where(*where, LabelRow.key == key))
            if existing is not None:
                existing.text = label
            else:
                count = s.scalar(select(func.count()).select_from(LabelRow).where(*where)) or 0
                if count >= MAX_LABELS:
                    what = f"column {column!r} of {name}" if column else name
                    raise CatalogError(f"{what} has {MAX_LABELS} labels already; remove one first (dal unlabel)")
                s.add(LabelRow(dataset_id=ds.id, column_name=target, key=key, text=label))
            s.flush()
            return self._labels(s, ds.id)

    def unlabel(self, name: str, label: str, *, column: str | None = None) -> tuple[Label, ...]:
        """Remove a label from dataset ``name`` or from one of its columns.

        Args:
            name: the dataset.
            label: the label's key (whatever its value), or ``key=value`` (removed only with that value).
            column: the column it is on; None: the dataset's own label.

        Returns:
            Every label of the dataset afterwards.

        Raises:
            DatasetNotFound: no such dataset. InvalidName: a malformed label.
            LabelNotFound: there is no such label there (naming the labels that are).
        """
        key, value = parse_label(label)
        if column is not None:
            validate_column(column, "column", optional=False)
        with self._write() as s:
            ds = self._dataset_row(s, name, for_update=True)
            where = (LabelRow.dataset_id == ds.id, LabelRow.column_name == (column or ""))
            row = s.scalar(select(LabelRow).where(*where, LabelRow.key == key))
            if row is None or (value is not None and row.text != label):
                present = s.scalars(select(LabelRow.text).where(*where).order_by(LabelRow.text)).all()
                what = f"column {column!r} of {name}" if column else name
                hint = f"its labels are {', '.join(present)}" if present else "it has no labels"
                raise LabelNotFound(f"label {label!r} on {what}", label, present, hint)
            s.delete(row)
            s.flush()
            return self._labels(s, ds.id)

    def labels(self, name: str) -> tuple[Label, ...]:
        """The labels of dataset ``name`` and of its columns: the dataset's first, then by column, then by key.

        Args:
            name: the dataset.

        Raises:
            DatasetNotFound: no such dataset.
        """
        with self._read() as s:
            return self._labels(s, self._dataset_row(s, name).id)

    @staticmethod
    def _labels(s: Session, dataset_id: int) -> tuple[Label, ...]:
        rows = s.scalars(select(LabelRow).where(LabelRow.dataset_id == dataset_id))
        return sorted_labels(label_value(r) for r in rows)

    @staticmethod
    def _drop_labels(s: Session, dataset_id: int) -> None:
        """Delete a dropped dataset's labels (explicitly: a catalog without enforced foreign keys keeps them)."""
        s.execute(delete(LabelRow).where(LabelRow.dataset_id == dataset_id))

    def labelled(self, label: str, names: Sequence[str] | None = None) -> set[str]:
        """The datasets that have ``label`` (``key`` or ``key=value``, exactly) on themselves or on a column.

        Args:
            label: the label's text.
            names: only among these datasets (None: all).

        Raises:
            InvalidName: a malformed label.
        """
        parse_label(label)
        stmt = select(DatasetRow.name).join(LabelRow, LabelRow.dataset_id == DatasetRow.id)
        stmt = stmt.where(LabelRow.text == label).distinct()
        if names is not None:
            stmt = stmt.where(DatasetRow.name.in_(list(names)))
        with self._read() as s:
            return set(s.scalars(stmt))
