"""Labels: dataset- and column-level labels (``pii``, ``gold``, ``owner-team=vision``; what DataHub and Unity
Catalog call tags; dal's tags name versions), one per (dataset, column, key), ``column_name`` empty for the dataset.

Revision ID: 0006
Revises: 0005
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "dal_labels",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("column_name", sa.String(length=200), nullable=False),
        sa.Column("key", sa.String(length=63), nullable=False),
        sa.Column("text", sa.String(length=264), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["dataset_id"], ["dal_datasets.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("dataset_id", "column_name", "key", name="uq_dal_labels_key"),
    )
    with op.batch_alter_table("dal_labels", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_dal_labels_dataset_id"), ["dataset_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_dal_labels_text"), ["text"], unique=False)


def downgrade() -> None:
    op.drop_table("dal_labels")
