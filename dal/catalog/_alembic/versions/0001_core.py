"""Core catalog tables: datasets, schemas and their fields, versions.

Revision ID: 0001
Revises:
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "dal_datasets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("format", sa.String(length=32), nullable=False),
        sa.Column("location", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("owner", sa.String(length=200), nullable=False),
        sa.Column("time_column", sa.String(length=200), nullable=True),
        sa.Column("current_version", sa.Integer(), nullable=False),
        sa.Column("properties", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )

    op.create_table(
        "dal_schemas",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(["dataset_id"], ["dal_datasets.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("dataset_id", "fingerprint", name="uq_dal_schemas_fingerprint"),
    )
    with op.batch_alter_table("dal_schemas", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_dal_schemas_dataset_id"), ["dataset_id"], unique=False)

    op.create_table(
        "dal_schema_fields",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("schema_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("nullable", sa.Boolean(), nullable=False),
        sa.Column("dtype", sa.String(length=64), nullable=True),
        sa.Column("shape", sa.JSON(), nullable=True),
        sa.Column("codec", sa.String(length=200), nullable=True),
        sa.ForeignKeyConstraint(["schema_id"], ["dal_schemas.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("schema_id", "position", name="uq_dal_schema_fields_position"),
    )
    with op.batch_alter_table("dal_schema_fields", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_dal_schema_fields_schema_id"), ["schema_id"], unique=False)

    op.create_table(
        "dal_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("operation", sa.String(length=64), nullable=False),
        sa.Column("row_count", sa.BigInteger(), nullable=False),
        sa.Column("file_count", sa.BigInteger(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("storage_version", sa.BigInteger(), nullable=True),
        sa.Column("schema_id", sa.Integer(), nullable=False),
        sa.Column("partition_columns", sa.JSON(), nullable=False),
        sa.Column("properties", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["dataset_id"], ["dal_datasets.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["schema_id"],
            ["dal_schemas.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("dataset_id", "number", name="uq_dal_versions_number"),
        sa.UniqueConstraint("dataset_id", "storage_version", name="uq_dal_versions_storage_version"),
    )
    with op.batch_alter_table("dal_versions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_dal_versions_dataset_id"), ["dataset_id"], unique=False)


def downgrade() -> None:
    for table in ("dal_versions", "dal_schema_fields", "dal_schemas", "dal_datasets"):
        op.drop_table(table)
