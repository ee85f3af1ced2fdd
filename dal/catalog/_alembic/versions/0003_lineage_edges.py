"""Lineage edges: one row per input of a version, indexed both ways (replaces a LIKE over version properties).

Existing lineage records (the ``lineage.upstream`` list in version properties, written by dal before this
revision) are copied into edges marked ``inferred``. Each recorded name is resolved to the dataset that held
it when the version was written, following renames (the ``former_names`` a rename records): a dataset that
gave the name up owns it up to then, the dataset called so now owns it from then on.

Revision ID: 0003
Revises: 0002
"""

import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 5_000


def upgrade() -> None:
    op.create_table(
        "dal_lineage",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("upstream_dataset_id", sa.Integer(), nullable=True),
        sa.Column("upstream_name", sa.String(length=200), nullable=False),
        sa.Column("upstream_version", sa.BigInteger(), nullable=False),
        sa.Column("filters", sa.Text(), nullable=True),
        sa.Column("how", sa.String(length=16), nullable=False),
        sa.ForeignKeyConstraint(["upstream_dataset_id"], ["dal_datasets.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["version_id"], ["dal_versions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("dal_lineage", schema=None) as batch_op:
        batch_op.create_index("ix_dal_lineage_upstream", ["upstream_dataset_id", "upstream_version"], unique=False)
        batch_op.create_index(batch_op.f("ix_dal_lineage_version_id"), ["version_id"], unique=False)
    _backfill(op.get_bind())


def downgrade() -> None:
    op.drop_table("dal_lineage")


# -- backfill: frozen here (a later change to dal's own rules must not change what this revision did) ---------


def _utc(value: Any) -> datetime | None:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


class _Names:
    """Which dataset held a name at a time: recorded renames first (``former_names``: name, until), then the
    dataset called so now, from the time it took the name (unbounded below when never renamed)."""

    def __init__(self, rows: Sequence[Any]) -> None:
        self.current: dict[str, tuple[int, datetime | None]] = {}
        self.former: dict[str, list[tuple[int, datetime | None, datetime]]] = {}
        for ds_id, name, properties in rows:
            start = None
            former = (_json(properties) or {}).get("former_names")
            for f in former if isinstance(former, list) else []:
                until = _utc(f.get("until")) if isinstance(f, dict) else None
                if until is None or not isinstance(f.get("name"), str):
                    continue
                self.former.setdefault(f["name"], []).append((ds_id, start, until))
                start = until
            self.current[name] = (ds_id, start)

    def holder(self, name: str, when: datetime | None) -> int | None:
        if when is None:
            return None
        for ds_id, start, until in self.former.get(name, []):
            if (start is None or when >= start) and when < until:
                return ds_id
        ds_id, start = self.current.get(name, (None, None))
        return ds_id if ds_id is not None and (start is None or when >= start) else None


def _edges(conn: sa.Connection, names: _Names) -> Iterator[dict[str, Any]]:
    versions = sa.table("dal_versions", sa.column("id"), sa.column("created_at"), sa.column("properties", sa.JSON()))
    rows = conn.execute(
        sa.select(versions.c.id, versions.c.created_at, versions.c.properties)
        .where(sa.cast(versions.c.properties, sa.Text).like('%"upstream"%'))
        .order_by(versions.c.id)
        .execution_options(yield_per=BATCH)  # this statement only: a server-side cursor on PostgreSQL
    )
    for version_id, created_at, properties in rows:
        record = (_json(properties) or {}).get("lineage")
        upstream = record.get("upstream") if isinstance(record, dict) else None
        seen = set()
        for u in upstream if isinstance(upstream, list) else []:
            if not isinstance(u, dict) or not isinstance(u.get("dataset"), str):
                continue
            number, filters = u.get("version"), u.get("filters")
            if isinstance(number, bool) or not isinstance(number, int):
                continue
            filters = filters if isinstance(filters, str) else None
            key = (u["dataset"], number, filters)
            if key in seen:
                continue
            seen.add(key)
            yield {
                "version_id": version_id,
                "upstream_dataset_id": names.holder(u["dataset"], _utc(created_at)),
                "upstream_name": u["dataset"][:200],
                "upstream_version": number,
                "filters": filters,
                "how": "inferred",
            }


def _backfill(conn: sa.Connection) -> None:
    datasets = sa.table("dal_datasets", sa.column("id"), sa.column("name"), sa.column("properties", sa.JSON()))
    names = _Names(conn.execute(sa.select(datasets.c.id, datasets.c.name, datasets.c.properties)).all())
    lineage = sa.table(
        "dal_lineage",
        *(sa.column(c) for c in ("version_id", "upstream_dataset_id", "upstream_name", "upstream_version")),
        sa.column("filters"),
        sa.column("how"),
    )
    batch: list[dict[str, Any]] = []
    for edge in list(_edges(conn, names)):  # read fully first: SQLite cannot insert while a cursor streams
        batch.append(edge)
        if len(batch) == BATCH:
            conn.execute(sa.insert(lineage), batch)
            batch = []
    if batch:
        conn.execute(sa.insert(lineage), batch)
