"""The catalog's own identity: one row naming this catalog by a random id.

A dataset's location belongs to one catalog (``dal.storage.claims``): the claim written into the location names
the catalog by this id, so two URLs of one database are one catalog, and a second database (a typo'd URL, a
team's new PostgreSQL catalog) is another, whatever its URL.

Revision ID: 0004
Revises: 0003
"""

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    table = op.create_table(
        "dal_catalog",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    now = datetime.now(UTC)
    op.bulk_insert(table, [{"id": str(uuid.uuid4()), "created_at": now.replace(tzinfo=None) if _sqlite() else now}])


def _sqlite() -> bool:
    return op.get_bind().dialect.name == "sqlite"


def downgrade() -> None:
    op.drop_table("dal_catalog")
