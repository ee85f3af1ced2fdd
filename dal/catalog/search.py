"""Finding datasets: the web UI's search (a glob or a substring of name, description, owner, format, tags,
labels, columns), its facets, sorting and pages, run in the database."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import false, func, or_, select, true

from dal.catalog.base import CatalogBase, like_pattern
from dal.catalog.errors import (
    CatalogError,
)
from dal.catalog.models import (
    DatasetRow,
    LabelRow,
    SchemaFieldRow,
    TagRow,
    VersionRow,
)
from dal.catalog.types import (
    DatasetInfo,
    validate_text,
)


class CatalogSearch(CatalogBase):
    """Search, facets and pages of datasets (part of ``Catalog``)."""

    @staticmethod
    def _search_clause(query: str | None) -> Any:
        """The WHERE clause of a search: a glob on the name (``weather.*``) or, without wildcards, a
        case-insensitive substring of the name or description; LIKE metacharacters are escaped, the text is
        a bound parameter."""
        if not query:
            return None
        if any(c in query for c in "*?"):
            return DatasetRow.name.like(like_pattern(query), escape="\\")
        needle = f"%{like_pattern(query.lower())}%"
        return or_(
            func.lower(DatasetRow.name).like(needle, escape="\\"),
            func.lower(DatasetRow.description).like(needle, escape="\\"),
        )

    @staticmethod
    def _within_clause(within: Sequence[str]) -> Any:
        """The WHERE clause keeping the datasets grant targets cover (``dal.catalog.auth.matches``): ``*`` every
        one, ``ns.*`` every name under ``ns.``, else that name; no targets: none. Targets are bound parameters."""
        if "*" in within:
            return true()
        exact = [t for t in within if not t.endswith(".*")]
        prefixes = [like_pattern(t[:-1]) + "%" for t in within if t.endswith(".*")]
        parts = ([DatasetRow.name.in_(exact)] if exact else []) + [
            DatasetRow.name.like(p, escape="\\") for p in prefixes
        ]
        return or_(*parts) if parts else false()

    @staticmethod
    def _find_clause(
        query: str | None,
        filters: Mapping[str, str] | None,
        skip: str | None = None,
        within: Sequence[str] | None = None,
    ) -> list[Any]:
        """The WHERE clauses of the web UI's search: ``query`` as ``_search_clause`` and, without wildcards, also
        the owner, the format, a tag, a label or a column name of the latest version containing it; ``filters``
        (facets) match exactly: ``format``, ``owner``, ``tag`` (a tag of any version), ``label`` (of the dataset or a
        column); ``column``: a column of the latest
        version whose name contains it, case-insensitive. ``skip``: a facet left out (to count that facet's values)."""
        from sqlalchemy.orm import aliased

        clauses: list[Any] = [] if within is None else [CatalogSearch._within_clause(within)]
        # aliases: the subqueries correlate with the outer dal_datasets only (a query that also joins versions or
        # tags, as sorting by size and the tag facet do, must not make them correlate with those too)
        tag, field, version, label = aliased(TagRow), aliased(SchemaFieldRow), aliased(VersionRow), aliased(LabelRow)
        latest_fields = (
            select(field.id)
            .join(version, version.schema_id == field.schema_id)
            .where(version.dataset_id == DatasetRow.id, version.number == DatasetRow.current_version)
        )
        if query and not any(c in query for c in "*?"):
            needle = f"%{like_pattern(query.lower())}%"
            clauses.append(
                or_(
                    func.lower(DatasetRow.name).like(needle, escape="\\"),
                    func.lower(DatasetRow.description).like(needle, escape="\\"),
                    func.lower(DatasetRow.owner).like(needle, escape="\\"),
                    func.lower(DatasetRow.format).like(needle, escape="\\"),
                    select(tag.id)
                    .where(tag.dataset_id == DatasetRow.id, func.lower(tag.name).like(needle, escape="\\"))
                    .exists(),
                    latest_fields.where(func.lower(field.name).like(needle, escape="\\")).exists(),
                    select(label.id)
                    .where(label.dataset_id == DatasetRow.id, func.lower(label.text).like(needle, escape="\\"))
                    .exists(),
                )
            )
        elif query:
            clauses.append(DatasetRow.name.like(like_pattern(query), escape="\\"))
        for key, value in (filters or {}).items():
            if not value or key == skip:
                continue
            if key == "format":
                clauses.append(DatasetRow.format == value)
            elif key == "owner":
                clauses.append(DatasetRow.owner == value)
            elif key == "tag":
                clauses.append(select(tag.id).where(tag.dataset_id == DatasetRow.id, tag.name == value).exists())
            elif key == "label":  # a label (KEY or KEY=VALUE, exactly) of the dataset or of one of its columns
                clauses.append(select(label.id).where(label.dataset_id == DatasetRow.id, label.text == value).exists())
            elif key == "column":  # a case-insensitive substring of a column name (tensors, emb_*: any part)
                part = f"%{like_pattern(value.lower())}%"
                clauses.append(latest_fields.where(func.lower(field.name).like(part, escape="\\")).exists())
            else:
                raise CatalogError(f"unknown search facet {key!r} (format, owner, tag, label, column)")
        return clauses

    def match_reasons(self, query: str | None, names: Sequence[str]) -> dict[str, list[tuple[str, str | None]]]:
        """Why each of ``names`` (a page of a search's results) matched ``query``, in the search's own terms
        (``_find_clause``, in the database).

        Args:
            query: the search text; a glob matches the name only.
            names: the datasets to explain.

        Returns:
            Name -> reasons: ``("name" | "description" | "owner" | "format", None)``, ``("tag", TAG)``,
            ``("column", COLUMN)`` (of the latest version), ``("label", LABEL)`` (a column's: ``"pii (column
            email)"``). Without a query: {}.

        Raises:
            CatalogError: ``query`` is not text fit for the catalog.
        """
        validate_text(query, "query", optional=True, max_length=1000)
        if not query or not names:
            return {}
        if any(c in query for c in "*?"):
            return {n: [("name", None)] for n in names}
        needle = f"%{like_pattern(query.lower())}%"
        out: dict[str, list[tuple[str, str | None]]] = {n: [] for n in names}
        own = ("name", "description", "owner", "format")
        flags = [func.lower(getattr(DatasetRow, c)).like(needle, escape="\\") for c in own]
        tags = (
            select(DatasetRow.name, TagRow.name)
            .join(TagRow, TagRow.dataset_id == DatasetRow.id)
            .where(DatasetRow.name.in_(names), func.lower(TagRow.name).like(needle, escape="\\"))
            .order_by(TagRow.name)
        )
        columns = (
            select(DatasetRow.name, SchemaFieldRow.name)
            .join(
                VersionRow, (VersionRow.dataset_id == DatasetRow.id) & (VersionRow.number == DatasetRow.current_version)
            )
            .join(SchemaFieldRow, SchemaFieldRow.schema_id == VersionRow.schema_id)
            .where(DatasetRow.name.in_(names), func.lower(SchemaFieldRow.name).like(needle, escape="\\"))
            .order_by(SchemaFieldRow.position)
        )
        labels = (
            select(DatasetRow.name, LabelRow.text, LabelRow.column_name)
            .join(LabelRow, LabelRow.dataset_id == DatasetRow.id)
            .where(DatasetRow.name.in_(names), func.lower(LabelRow.text).like(needle, escape="\\"))
            .order_by(LabelRow.column_name, LabelRow.text)
        )
        with self._read() as s:
            for name, *hits in s.execute(select(DatasetRow.name, *flags).where(DatasetRow.name.in_(names))):
                out[name] += [(c, None) for c, hit in zip(own, hits, strict=True) if hit]
            for kind, stmt in (("tag", tags), ("column", columns)):
                for name, value in s.execute(stmt):
                    out[name].append((kind, str(value)))
            for name, text, column in s.execute(labels):  # a column's label: "pii (column email)"
                out[name].append(("label", f"{text} (column {column})" if column else str(text)))
        return out

    def count_datasets(
        self, query: str | None = None, filters: Mapping[str, str] | None = None, *, within: Sequence[str] | None = None
    ) -> int:
        """How many datasets match ``query`` and ``filters`` (as ``search_datasets``).

        Args:
            query: as ``search_datasets``'.
            filters: as ``search_datasets``'.
            within: as ``search_datasets``'.

        Returns:
            The number of matching datasets.

        Raises:
            CatalogError: ``query`` unfit for the catalog, or an unknown facet.
        """
        validate_text(query, "query", optional=True, max_length=1000)
        stmt = select(func.count()).select_from(DatasetRow).where(*self._find_clause(query, filters, within=within))
        with self._read() as s:
            return int(s.scalar(stmt) or 0)

    def facets(
        self, query: str | None = None, filters: Mapping[str, str] | None = None, *, within: Sequence[str] | None = None
    ) -> dict[str, dict[str, int]]:
        """For the datasets a search finds, how many have each format, owner, tag and label (of the dataset or a
        column; the 50 commonest of each), each facet counted under the other filters only (so choosing one still
        shows the alternatives).

        Args:
            query: as ``search_datasets``'.
            filters: as ``search_datasets``'.
            within: as ``search_datasets``' (a count never includes a dataset outside them).

        Returns:
            Facet (``format``, ``owner``, ``tag``, ``label``) -> value -> datasets, commonest first.

        Raises:
            CatalogError: ``query`` unfit for the catalog, or an unknown facet.
        """
        validate_text(query, "query", optional=True, max_length=1000)
        out: dict[str, dict[str, int]] = {}
        with self._read() as s:
            for facet, column in (("format", DatasetRow.format), ("owner", DatasetRow.owner)):
                n = func.count()
                stmt = (
                    select(column, n)
                    .where(*self._find_clause(query, filters, skip=facet, within=within), column != "")
                    .group_by(column)
                    .order_by(n.desc(), column)
                    .limit(50)
                )
                out[facet] = {str(k): int(v) for k, v in s.execute(stmt)}
            n = func.count(func.distinct(TagRow.dataset_id))
            stmt = (
                select(TagRow.name, n)
                .join(DatasetRow, DatasetRow.id == TagRow.dataset_id)
                .where(*self._find_clause(query, filters, skip="tag", within=within))
                .group_by(TagRow.name)
                .order_by(n.desc(), TagRow.name)
                .limit(50)
            )
            out["tag"] = {str(k): int(v) for k, v in s.execute(stmt)}
            n = func.count(func.distinct(LabelRow.dataset_id))
            stmt = (
                select(LabelRow.text, n)
                .join(DatasetRow, DatasetRow.id == LabelRow.dataset_id)
                .where(*self._find_clause(query, filters, skip="label", within=within))
                .group_by(LabelRow.text)
                .order_by(n.desc(), LabelRow.text)
                .limit(50)
            )
            out["label"] = {str(k): int(v) for k, v in s.execute(stmt)}
        return out

    def search_datasets(
        self,
        query: str | None = None,
        *,
        limit: int = 50,
        offset: int = 0,
        filters: Mapping[str, str] | None = None,
        sort: str = "name",
        within: Sequence[str] | None = None,
    ) -> list[tuple[DatasetInfo, int | None, int | None]]:
        """One page of datasets, with the row count and size in bytes of each one's latest version; LIMIT/OFFSET
        run in the database.

        Args:
            query: a glob on the name, else a substring of the name, description, owner, format, a tag, a label or
                a column of the latest version (any case).
            limit: datasets per page (at most 1,000).
            offset: datasets skipped.
            filters: exact facets: ``format``, ``owner``, ``tag`` (of any version), ``label`` (of the dataset or a
                column); ``column``: part of a column name of the latest version (any case).
            sort: ``name``, ``updated``, ``rows`` or ``size``, descending with a leading ``-`` (ties by name).
            within: grant targets (``*``, ``ns.*``, a name) the datasets must be covered by: a principal's, so a
                page, a count and a facet hold only what it may read (None: every dataset).

        Returns:
            (dataset, rows, bytes) per dataset; rows and bytes ``None`` before its first version.

        Raises:
            CatalogError: ``query`` unfit for the catalog, an unknown facet or sort.
        """
        validate_text(query, "query", optional=True, max_length=1000)
        limit, offset = max(0, min(int(limit), 1000)), max(0, int(offset))
        descending = sort.startswith("-")
        key = sort.lstrip("-")
        latest = (VersionRow.dataset_id == DatasetRow.id) & (VersionRow.number == DatasetRow.current_version)
        orders = {
            "name": DatasetRow.name,
            "updated": DatasetRow.updated_at,
            "rows": VersionRow.row_count,
            "size": VersionRow.size_bytes,
        }
        if key not in orders:
            raise CatalogError(f"sort must be one of {', '.join(orders)} (a leading - for descending), not {sort!r}")
        order = orders[key].desc() if descending else orders[key].asc()
        # the page of ids first (the name index walks to the offset), then the latest versions of those rows only
        page = select(DatasetRow.id, orders[key].label("k"), DatasetRow.name.label("n"))
        if key in ("rows", "size"):
            page = page.outerjoin(VersionRow, latest)
            order = order.nulls_last()
        page = (
            page.where(*self._find_clause(query, filters, within=within))
            .order_by(order, DatasetRow.name)
            .limit(limit)
            .offset(offset)
        )
        ids = page.subquery()
        outer = ids.c.k.desc() if descending else ids.c.k.asc()
        if key in ("rows", "size"):
            outer = outer.nulls_last()
        stmt = (
            select(DatasetRow, VersionRow.row_count, VersionRow.size_bytes)
            .join(ids, ids.c.id == DatasetRow.id)
            .outerjoin(VersionRow, latest)
            .order_by(outer, ids.c.n)
        )
        with self._read() as s:
            return [(self._dataset_info(d), rows, size) for d, rows, size in s.execute(stmt)]
