"""The registry of formats: each one by name, loaded on first use (its extra may be missing), in detection order."""

from __future__ import annotations

from collections.abc import Mapping

from dal.errors import DalError
from dal.formats.base import Format

NAMES = ("delta", "petastorm", "parquet")  # detection tries them in this order


def _load(name: str) -> Format:
    # imported here, not at the top: a format's module imports its library (delta-rs for Delta) and a missing
    # extra must only fail the format that needs it
    if name == "delta":
        from dal.formats.delta.format import DeltaFormat

        return DeltaFormat()
    if name == "petastorm":
        from dal.formats.petastorm.format import PetastormFormat

        return PetastormFormat()
    from dal.formats.parquet import ParquetFormat

    return ParquetFormat()


def format_names() -> list[str]:
    """The registered formats, in detection order."""
    return list(NAMES)


def get_format(name: str) -> Format:
    """The format called ``name``.

    Raises:
        DalError: unknown format. MissingDependency: its extra is not installed (with the pip command).
    """
    if name not in NAMES:
        raise DalError(f"unknown format {name!r}; dal supports: {', '.join(sorted(NAMES))}")
    return _load(name)


def detect(location: str, storage_options: Mapping[str, str], *, writable: bool = False) -> Format | None:
    """The first registered format (only those dal writes, when ``writable``) with a table at ``location``;
    a format that cannot look there (its extra missing, storage refusing) counts as absent."""
    for name in NAMES:
        try:
            fmt = get_format(name)
            if (fmt.writable or not writable) and fmt.exists(location, storage_options):
                return fmt
        except DalError:
            continue
    return None
