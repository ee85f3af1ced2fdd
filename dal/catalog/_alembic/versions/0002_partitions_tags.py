"""Partitions present in each version, and tags on versions.

Revision ID: 0002
Revises: 0001
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "dal_partitions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("values", sa.JSON(), nullable=False),
        sa.Column("row_count", sa.BigInteger(), nullable=False),
        sa.Column("file_count", sa.BigInteger(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["version_id"], ["dal_versions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("version_id", "key", name="uq_dal_partitions_key"),
    )
    with op.batch_alter_table("dal_partitions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_dal_partitions_version_id"), ["version_id"], unique=False)

    op.create_table(
        "dal_tags",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["dataset_id"], ["dal_datasets.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["version_id"], ["dal_versions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("dataset_id", "name", name="uq_dal_tags_name"),
    )
    with op.batch_alter_table("dal_tags", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_dal_tags_dataset_id"), ["dataset_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_dal_tags_version_id"), ["version_id"], unique=False)


def downgrade() -> None:
    op.drop_table("dal_tags")
    op.drop_table("dal_partitions")
