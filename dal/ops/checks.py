"""Whether versions can be read: the files each pins are still in storage (``dal versions --check``, the web
UI's ``?check=1``).

The catalog knows only what dal saw: a version ``dal gc`` expired, or one whose files ``sync`` found gone, is
marked ``unavailable``. Files removed since by anything else (a VACUUM, a lifecycle rule, a person) are not
known until something looks, and looking costs storage round trips per version (the version's file list: a
Delta log replay, a Petastorm record) and per file (a stat, a HEAD). So a listing shows only the catalog's
marks and never calls a version readable on that alone; a check is asked for, costs one listing per version
and one existence look per distinct file of the versions it covers (a file shared by many versions is looked
at once), and writes nothing to the catalog: a file put back makes the version readable again, and a reader
that may not write the catalog can check too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow.fs as pafs

from dal import progress
from dal.catalog.types import DatasetInfo, VersionInfo
from dal.errors import DalError, one_line
from dal.formats.registry import get_format
from dal.storage.location import Location

BATCH = 1000  # paths per existence look (one call of the filesystem)


def unreadable(
    info: DatasetInfo, versions: Sequence[VersionInfo], storage_options: Mapping[str, str] | None = None
) -> dict[int, str | None]:
    """Why each of ``versions`` cannot be read, by number; None where every file it pins is in storage.

    A version the catalog marks unavailable keeps the catalog's reason (storage is not asked about it); one
    whose file list cannot be read says why; otherwise the files missing are counted, the first named.

    Raises:
        DalError: the dataset's storage cannot be listed at all (credentials, an unknown scheme).
    """
    options = dict(storage_options or {})
    fmt = get_format(info.format)
    out: dict[int, str | None] = {}
    pinned: dict[int, list[str]] = {}
    for v in progress.each(versions, f"listing the files of {info.name}'s versions", unit="versions"):
        if v.unavailable:
            out[v.number] = v.unavailable
            continue
        try:
            pinned[v.number] = [f.uri for f in fmt.files(info.location, v, options)]
        except DalError as e:
            out[v.number] = one_line(e)
    loc = Location.of(info.location, options)
    gone = _missing(loc, sorted({u for uris in pinned.values() for u in uris}))
    for number, uris in pinned.items():
        lost = [u for u in uris if u in gone]
        out[number] = (
            f"{len(lost):,} of its {len(uris):,} file(s) are missing in storage (e.g. {lost[0]})" if lost else None
        )
    return {v.number: out[v.number] for v in versions}


def _missing(loc: Location, uris: Sequence[str]) -> set[str]:
    """Those of ``uris`` that are not files in ``loc``'s storage."""
    gone: set[str] = set()
    for start in progress.each(range(0, len(uris), BATCH), "looking for the files in storage", unit="batches"):
        chunk = uris[start : start + BATCH]
        found = loc.fs.get_file_info([loc.path_of(u) for u in chunk])
        gone.update(u for u, i in zip(chunk, found, strict=True) if i.type != pafs.FileType.File)
    return gone
