"""Where the catalog lives by default: ``$DAL_CATALOG_URL``, else ``<data dir>/catalog.db``.

Plain Python (no SQLAlchemy): the CLI asks this before it knows whether a command needs a database engine.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_URL = "DAL_CATALOG_URL"
ENV_HOME = "DAL_HOME"


def data_dir() -> Path:
    """dal's data directory: ``$DAL_HOME``, else the platform's user data dir (``~/.local/share/dal`` on Linux)."""
    home = os.environ.get(ENV_HOME)
    if home:
        return Path(home).expanduser()
    import platformdirs

    return platformdirs.user_data_path("dal")


def default_url() -> str:
    """``$DAL_CATALOG_URL``, else the embedded SQLite catalog ``<data dir>/catalog.db``."""
    return os.environ.get(ENV_URL) or f"sqlite:///{data_dir() / 'catalog.db'}"
