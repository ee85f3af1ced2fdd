"""Principals, bearer tokens (hashes only), grants and the audit of ``dal serve``.

A principal is a user or a service (a job); a token belongs to one principal and is stored as the SHA-256 of
its secret under a public id (lookup by id, comparison in constant time); a grant gives a principal READ,
WRITE or MANAGE on a dataset or a namespace (``weather.*``); the audit keeps who pinned what and every refusal.

Revision ID: 0005
Revises: 0004
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "dal_principals",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "dal_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("token_id", sa.String(length=32), nullable=False),
        sa.Column("principal_id", sa.Integer(), nullable=False),
        sa.Column("secret_sha256", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["principal_id"], ["dal_principals.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_id"),
    )
    with op.batch_alter_table("dal_tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_dal_tokens_principal_id"), ["principal_id"], unique=False)
    op.create_table(
        "dal_grants",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("principal_id", sa.Integer(), nullable=False),
        sa.Column("privilege", sa.String(length=16), nullable=False),
        sa.Column("target", sa.String(length=202), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["principal_id"], ["dal_principals.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("principal_id", "privilege", "target", name="uq_dal_grants"),
    )
    with op.batch_alter_table("dal_grants", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_dal_grants_principal_id"), ["principal_id"], unique=False)
    op.create_table(
        "dal_audit",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("principal", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("dataset", sa.String(length=200), nullable=True),
        sa.Column("version", sa.BigInteger(), nullable=True),
        sa.Column("client", sa.Text(), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("dal_audit", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_dal_audit_at"), ["at"], unique=False)
        batch_op.create_index("ix_dal_audit_dataset", ["dataset", "at"], unique=False)


def downgrade() -> None:
    op.drop_table("dal_audit")
    op.drop_table("dal_grants")
    op.drop_table("dal_tokens")
    op.drop_table("dal_principals")
