"""SQLAlchemy 2.x models of the catalog. Only ``dal.catalog.store`` touches these; callers get ``dal.catalog.types``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

from dal.catalog.types import as_utc


class UTCDateTime(TypeDecorator[datetime]):
    """Stores aware datetimes as UTC; returns them aware (SQLite has no time zones)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime stored in the catalog; pass an aware datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else as_utc(value)


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class CatalogRow(Base):
    """This catalog's identity (one row): the id a location's claim names (``dal.storage.claims``)."""

    __tablename__ = "dal_catalog"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class DatasetRow(Base):
    __tablename__ = "dal_datasets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    format: Mapped[str] = mapped_column(String(32))
    location: Mapped[str] = mapped_column(Text)
    description: Mapped[str] = mapped_column(Text, default="")
    owner: Mapped[str] = mapped_column(String(200), default="")
    time_column: Mapped[str | None] = mapped_column(String(200), nullable=True)
    # -1 before the first version; bumped under a row lock so numbers are gap-free
    current_version: Mapped[int] = mapped_column(Integer, default=-1)
    properties: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class SchemaRow(Base):
    __tablename__ = "dal_schemas"
    __table_args__ = (UniqueConstraint("dataset_id", "fingerprint", name="uq_dal_schemas_fingerprint"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("dal_datasets.id", ondelete="CASCADE"), index=True)
    fingerprint: Mapped[str] = mapped_column(String(64))
    fields: Mapped[list[SchemaFieldRow]] = relationship(
        order_by="SchemaFieldRow.position", cascade="all, delete-orphan", lazy="selectin"
    )


class SchemaFieldRow(Base):
    __tablename__ = "dal_schema_fields"
    __table_args__ = (UniqueConstraint("schema_id", "position", name="uq_dal_schema_fields_position"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    schema_id: Mapped[int] = mapped_column(ForeignKey("dal_schemas.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(Text)
    type: Mapped[str] = mapped_column(Text)
    nullable: Mapped[bool] = mapped_column(Boolean, default=True)
    dtype: Mapped[str | None] = mapped_column(String(64), nullable=True)
    shape: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)
    codec: Mapped[str | None] = mapped_column(String(200), nullable=True)


class VersionRow(Base):
    __tablename__ = "dal_versions"
    __table_args__ = (
        UniqueConstraint("dataset_id", "number", name="uq_dal_versions_number"),
        UniqueConstraint("dataset_id", "storage_version", name="uq_dal_versions_storage_version"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("dal_datasets.id", ondelete="CASCADE"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    recorded_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    operation: Mapped[str] = mapped_column(String(64))
    row_count: Mapped[int] = mapped_column(BigInteger)
    file_count: Mapped[int] = mapped_column(BigInteger, default=0)
    size_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    storage_version: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    schema_id: Mapped[int] = mapped_column(ForeignKey("dal_schemas.id"))
    partition_columns: Mapped[list[Any]] = mapped_column(JSON, default=list)
    properties: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)

    schema: Mapped[SchemaRow] = relationship(lazy="joined")
    tags: Mapped[list[TagRow]] = relationship(lazy="selectin", order_by="TagRow.name", viewonly=True)


class PartitionRow(Base):
    __tablename__ = "dal_partitions"
    __table_args__ = (UniqueConstraint("version_id", "key", name="uq_dal_partitions_key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version_id: Mapped[int] = mapped_column(ForeignKey("dal_versions.id", ondelete="CASCADE"), index=True)
    key: Mapped[str] = mapped_column(Text)
    values: Mapped[list[Any]] = mapped_column(JSON)
    row_count: Mapped[int] = mapped_column(BigInteger)
    file_count: Mapped[int] = mapped_column(BigInteger, default=0)
    size_bytes: Mapped[int] = mapped_column(BigInteger, default=0)


class TagRow(Base):
    __tablename__ = "dal_tags"
    __table_args__ = (UniqueConstraint("dataset_id", "name", name="uq_dal_tags_name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("dal_datasets.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    version_id: Mapped[int] = mapped_column(ForeignKey("dal_versions.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class LabelRow(Base):
    """A label on a dataset (``column_name`` empty) or on one of its columns: ``key``, and ``text`` (``key`` or
    ``key=value``: what search and facets match); one per (dataset, column, key)."""

    __tablename__ = "dal_labels"
    __table_args__ = (UniqueConstraint("dataset_id", "column_name", "key", name="uq_dal_labels_key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("dal_datasets.id", ondelete="CASCADE"), index=True)
    column_name: Mapped[str] = mapped_column(String(200), default="")
    key: Mapped[str] = mapped_column(String(63))
    text: Mapped[str] = mapped_column(String(264), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class LineageRow(Base):
    """One input of a version written by dal: the dataset version it read (an edge of the lineage graph).

    ``upstream_dataset_id`` is the dataset that held ``upstream_name`` when it was read (renames do not
    change it; NULL once that dataset is dropped); ``how``: ``declared`` (``dal.write(inputs=...)``) or
    ``inferred`` (the reads the process made since its previous write). Indexed both ways: a version's
    inputs by ``version_id``, what was built from a version by (``upstream_dataset_id``, ``upstream_version``).
    """

    __tablename__ = "dal_lineage"
    __table_args__ = (Index("ix_dal_lineage_upstream", "upstream_dataset_id", "upstream_version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version_id: Mapped[int] = mapped_column(ForeignKey("dal_versions.id", ondelete="CASCADE"), index=True)
    upstream_dataset_id: Mapped[int | None] = mapped_column(
        ForeignKey("dal_datasets.id", ondelete="SET NULL"), nullable=True
    )
    upstream_name: Mapped[str] = mapped_column(String(200))
    upstream_version: Mapped[int] = mapped_column(BigInteger)
    filters: Mapped[str | None] = mapped_column(Text, nullable=True)
    how: Mapped[str] = mapped_column(String(16))


class PrincipalRow(Base):
    """A user or a service principal (a job) of ``dal serve`` (``dal.catalog.auth``)."""

    __tablename__ = "dal_principals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    kind: Mapped[str] = mapped_column(String(16))  # user | service
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class TokenRow(Base):
    """A bearer token: its public id and the SHA-256 of its secret (never the secret itself)."""

    __tablename__ = "dal_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_id: Mapped[str] = mapped_column(String(32), unique=True)
    principal_id: Mapped[int] = mapped_column(ForeignKey("dal_principals.id", ondelete="CASCADE"), index=True)
    secret_sha256: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)


class GrantRow(Base):
    """A privilege (READ, WRITE, MANAGE) of a principal on a dataset name or a namespace (``weather.*``, ``*``)."""

    __tablename__ = "dal_grants"
    __table_args__ = (UniqueConstraint("principal_id", "privilege", "target", name="uq_dal_grants"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    principal_id: Mapped[int] = mapped_column(ForeignKey("dal_principals.id", ondelete="CASCADE"), index=True)
    privilege: Mapped[str] = mapped_column(String(16))
    target: Mapped[str] = mapped_column(String(202))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class AuditRow(Base):
    """One audited request of ``dal serve``: a pin, an admin change or a refusal (names, not ids: kept after a
    principal or dataset is gone)."""

    __tablename__ = "dal_audit"
    __table_args__ = (Index("ix_dal_audit_dataset", "dataset", "at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    principal: Mapped[str] = mapped_column(String(200))
    action: Mapped[str] = mapped_column(String(32))
    dataset: Mapped[str | None] = mapped_column(String(200), nullable=True)
    version: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    client: Mapped[str] = mapped_column(Text, default="")
    outcome: Mapped[str] = mapped_column(String(16))
    detail: Mapped[str] = mapped_column(Text, default="")
