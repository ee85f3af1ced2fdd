"""Where the catalog lives by default: ``$DAL_CATALOG_URL``, else the profile ``$DAL_PROFILE`` (or the config file's
``default``) names, else ``<data dir>/catalog.db``.

Named catalog profiles live in a TOML file, ``$DAL_CONFIG`` or ``~/.config/dal/config.toml`` (the platform's user
config dir; TOML because Python reads it without a dependency)::

    default = "team"

    [catalogs.team]
    url = "postgresql+psycopg://ml@db.internal:5432/catalog"
    # a password stays out of the file: ${VAR} is replaced by the environment variable VAR
    # url = "postgresql+psycopg://ml:${DAL_PG_PASSWORD}@db.internal:5432/catalog"

    [catalogs.local]
    url = "sqlite:////data/dal/catalog.db"

Plain Python (no SQLAlchemy): the CLI asks this before it knows whether a command needs a database engine.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from dal.catalog.errors import CatalogError
from dal.catalog.urls import MAX_URL_LENGTH

ENV_URL = "DAL_CATALOG_URL"
ENV_HOME = "DAL_HOME"
ENV_CONFIG = "DAL_CONFIG"
ENV_PROFILE = "DAL_PROFILE"
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
MAX_CONFIG_BYTES = 1 << 20  # a config file names a few catalogs; a larger one is refused unread


class ProfileError(CatalogError):
    """A catalog profile that is not in the config file, or a config file that cannot be read."""


def data_dir() -> Path:
    """dal's data directory: ``$DAL_HOME``, else the platform's user data dir (``~/.local/share/dal`` on Linux)."""
    home = os.environ.get(ENV_HOME)
    if home:
        return Path(home).expanduser()
    import platformdirs

    return platformdirs.user_data_path("dal")


def config_path() -> Path:
    """The config file: ``$DAL_CONFIG``, else ``<user config dir>/config.toml`` (``~/.config/dal`` on Linux)."""
    explicit = os.environ.get(ENV_CONFIG)
    if explicit:
        return Path(explicit).expanduser()
    import platformdirs

    return platformdirs.user_config_path("dal") / "config.toml"


def load_config(path: Path | None = None) -> dict[str, Any]:
    """The config file as a dict (empty when there is none).

    Raises:
        ProfileError: the file cannot be read, is larger than ``MAX_CONFIG_BYTES``, is not UTF-8, is not valid
            TOML, or is nested deeper than the TOML parser's recursion allows."""
    import tomllib

    path = config_path() if path is None else path
    try:
        with path.open("rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        if os.environ.get(ENV_CONFIG):  # named explicitly: a typo must not fall back to another catalog
            raise ProfileError(f"{ENV_CONFIG} names {path}, which does not exist") from None
        return {}
    except OSError as e:
        raise ProfileError(f"cannot read the dal config file {path}: {e.strerror or e}") from e
    if len(data) > MAX_CONFIG_BYTES:
        raise ProfileError(f"the dal config file {path} is larger than {MAX_CONFIG_BYTES >> 20} MiB")
    try:
        return tomllib.loads(data.decode())
    except UnicodeDecodeError as e:
        raise ProfileError(f"the dal config file {path} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    except tomllib.TOMLDecodeError as e:
        raise ProfileError(f"the dal config file {path} is not valid TOML: {e}") from e
    except RecursionError:  # tomllib is pure Python: the stack unwound cleanly
        raise ProfileError(f"the dal config file {path} is nested too deeply (arrays or tables in tables)") from None


def profiles(config: dict[str, Any] | None = None) -> dict[str, str]:
    """Profile name -> catalog URL as written in the file (``${VAR}`` not expanded: nothing secret to show)."""
    config = load_config() if config is None else config
    catalogs = config.get("catalogs") or {}
    if not isinstance(catalogs, dict):
        raise ProfileError(f"{config_path()}: [catalogs] must be a table of profiles")
    out = {}
    for name, entry in catalogs.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
            raise ProfileError(f'{config_path()}: profile {name!r} needs url = "..."')
        if len(entry["url"]) > MAX_URL_LENGTH:
            raise ProfileError(
                f"{config_path()}: the url of profile {name!r} is {len(entry['url']):,} characters long, "
                f"at most {MAX_URL_LENGTH:,}"
            )
        out[str(name)] = entry["url"]
    return out


def profile_url(name: str, config: dict[str, Any] | None = None) -> str:
    """The catalog URL of profile ``name``, ``${VAR}`` replaced from the environment.

    Raises:
        ProfileError: no such profile, or a variable it names is not set."""
    known = profiles(config)
    if name not in known:
        listed = ", ".join(sorted(known)) or "none"
        raise ProfileError(f"no catalog profile {name!r} in {config_path()} (profiles: {listed})")

    def expand(m: re.Match[str]) -> str:
        value = os.environ.get(m.group(1))
        if value is None:
            raise ProfileError(f"catalog profile {name!r} needs the environment variable {m.group(1)}")
        return value

    return _VAR.sub(expand, known[name])


_chosen: str | None = None  # the profile ``--profile`` named for this invocation (``choose_profile``)


def choose_profile(name: str | None) -> None:
    """Make ``name`` the profile in use (the CLI's ``--profile``; None: none named): ``default_profile`` answers it,
    so the server token of that profile, not of another with the same URL, is the one used (``dal.catalog.remote``)."""
    global _chosen
    _chosen = name


def default_profile(config: dict[str, Any] | None = None) -> str | None:
    """The profile in use: the one ``--profile`` named, else ``$DAL_PROFILE``, else the config file's ``default``."""
    if _chosen:
        return _chosen
    chosen = os.environ.get(ENV_PROFILE)
    if chosen:
        return chosen
    config = load_config() if config is None else config
    default = config.get("default")
    return str(default) if default else None


def default_url() -> str:
    """``$DAL_CATALOG_URL``, else the URL of the profile ``$DAL_PROFILE`` or the config file's ``default`` names,
    else the embedded SQLite catalog ``<data dir>/catalog.db``."""
    explicit = os.environ.get(ENV_URL)
    if explicit:
        return explicit
    if os.environ.get(ENV_PROFILE) or os.environ.get(ENV_CONFIG) or config_path().is_file():
        config = load_config()
        chosen = default_profile(config)
        if chosen:
            return profile_url(chosen, config)
    return f"sqlite:///{data_dir() / 'catalog.db'}"
