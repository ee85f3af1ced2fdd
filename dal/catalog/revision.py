"""The catalog schema revision this dal needs, and where the database records its own (plain Python)."""

from __future__ import annotations

# the newest script in _alembic/versions (tests/catalog/test_migrations.py checks it against alembic's own head)
HEAD = "0006"
VERSION_TABLE = "dal_alembic_version"
