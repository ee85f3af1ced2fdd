"""Storage credentials are vended only for a location dal can prove is the dataset's.

A grant says what a principal may read in the catalog; a vended credential says what it may read in storage. A
principal that may create datasets in its own namespace chooses their locations, so the location alone proves
nothing: pointed at another team's prefix (refused by the catalog: one location, one dataset) or at data no
dataset records (a raw prefix beside the datasets), a pin would hand out credentials for it. So before handing
credentials out the server looks, with those very credentials, at what is there:

- **reads** (a pin): the location's claim (``dal.storage.claims``) names this catalog and this dataset (or a name
  it had before a rename), and no other record of this catalog is at, inside or around it (a dataset dropped
  without its data leaves a claim naming it: another dataset recorded there later is not proven). A location without a claim (a read-only registration, a table another
  catalog owns) gets no credentials: the reader uses its own, and storage decides.
- **writes** (a write begins): the same, or a location that holds nothing yet (a new dataset's).

A positive answer is kept for ``TTL_S`` seconds per (dataset, location), so a thousand ranks pinning at once cost
one look, not a thousand.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from dal.storage import claims
from dal.storage.location import Location

TTL_S = 60.0
_proven: dict[tuple[str, str, str, bool], float] = {}
_lock = threading.Lock()


def _empty(loc: Location) -> bool:
    for _ in loc.list(""):
        return False
    return True


def _key(catalog_id: str, names: tuple[str, ...], location: str, empty_ok: bool) -> tuple[str, str, str, bool]:
    return (catalog_id, "\n".join(names), location, empty_ok)


def _cached(catalog_id: str, names: tuple[str, ...], location: str, empty_ok: bool) -> bool:
    """Whether this proof was made less than ``TTL_S`` seconds ago."""
    with _lock:
        return _proven.get(_key(catalog_id, names, location, empty_ok), 0.0) > time.monotonic()


def proven(
    catalog_id: str, names: tuple[str, ...], location: str, options: Mapping[str, str], *, empty_ok: bool = False
) -> bool:
    """Whether ``location`` is proven the dataset's in the catalog ``catalog_id``: its claim names the catalog and
    the dataset (``names``: its name, then its former names: a rename does not touch storage) and is not a
    purge's (the caller has checked that no other record is there); or, ``empty_ok``, it holds nothing. Looks
    with ``options`` (the credentials about to be vended); any failure to look is no proof."""
    if _cached(catalog_id, names, location, empty_ok):
        return True
    key, now = _key(catalog_id, names, location, empty_ok), time.monotonic()
    loc = Location.of(location, dict(options))
    try:
        claim = claims.read(loc)
        ok = claim is not None and claim.catalog == catalog_id and claim.dataset in names and not claim.purging
        if not ok and claim is None and empty_ok:
            ok = _empty(loc)
    except Exception:  # unreadable, refused, not a claim: no proof
        ok = False
    if ok:
        with _lock:
            if len(_proven) > 10_000:
                _proven.clear()
            _proven[key] = now + TTL_S
    return ok


UNPROVEN = "not vended: the location's claim does not name this catalog (or another record is there)"


def checked(
    catalog_id: str,
    names: tuple[str, ...],
    location: str,
    credentials: dict[str, object] | None,
    others: Callable[[], list[str]],
    *,
    empty_ok: bool = False,
) -> dict[str, object] | None:
    """``credentials`` when ``location`` is proven the dataset's (``proven``; ``names``: its name and former names)
    and ``others()`` (the catalog's other records at, inside or around it, which disprove it) is empty; else None
    (nothing is handed out). ``others`` is asked only when the proof is not cached: a pin under fan-in reads
    neither storage nor every dataset's location again."""
    if credentials is None:
        return None
    options = credentials.get("options")
    if not isinstance(options, dict):
        return None
    if _cached(catalog_id, names, location, empty_ok):
        return credentials
    if others():
        return None
    return credentials if proven(catalog_id, names, location, options, empty_ok=empty_ok) else None


def names_of(properties: Mapping[str, object], name: str) -> tuple[str, ...]:
    """The dataset's name and the names it had (its ``former_names`` property: ``{"name", "until"}`` each)."""
    former = properties.get("former_names")
    if not isinstance(former, list):
        return (name,)
    return (name, *(str(f["name"]) for f in former if isinstance(f, dict) and isinstance(f.get("name"), str)))
