"""One table, one catalog: the claim a catalog writes into a dataset's location, and the checks every writer and
every maintenance operation makes against it.

A dataset's location belongs to exactly one catalog. The first catalog that records a location (a write,
``register`` or ``sync``) claims it: ``<location>/_dal_catalog.json`` names the catalog by the random id its
database holds (``Catalog.catalog_id``; two URLs of one database are one catalog), its URL with any password
masked (for messages), and the dataset's name there. Every write, register, sync, gc, optimize, purge and drop
checks the claim first; another catalog is refused before anything reaches storage, with one line naming the
claiming catalog and the ways out (read it from there, register it here read-only, or take the claim over
explicitly: ``take_over``, logged in the claim's ``history``).

Why a file in the location, like the write intents: every catalog that can reach the data can see it, whatever
database it uses; a first write has no catalog entry yet; object stores give an atomic create-if-absent, so two
catalogs racing for a new location cannot both win. Readers ignore it (Delta, Spark, Hive and pyarrow skip
``_``-prefixed paths; Petastorm readers open a version's own directory).

A purge marks the claim ``purging`` before it deletes anything and removes the claim after the catalog entry:
a write to a location whose purge was stopped half-way is refused until the purge is finished (a Delta log
whose data files are gone would otherwise take a new commit whose reads all fail). A ``purging`` claim whose
catalog no longer records the dataset (the purge was stopped after its last step but one) is free again.

This module takes values (the catalog's id, URL and dataset name); ``dal.api`` and ``dal.ops`` call it.
"""

from __future__ import annotations

import json
import logging
import math
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

from dal.errors import ClaimedElsewhere, FormatError, PurgeUnfinished, ReadOnlyDataset
from dal.storage.location import Location

FILE = "_dal_catalog.json"
MAX_BYTES = 64 * 1024  # a claim is a few hundred bytes; anything larger is not one of dal's
MAX_HISTORY = 20  # transfers kept in the claim (the newest ones)
FORMAT_VERSION = 1
# a dataset property: registered read-only in this catalog (``dal register --read-only``): it reads every version
# and never writes, gc's, optimizes or purges, whoever claims the location
READ_ONLY = "dal.read_only"
# a version property: its storage commit was written by dal for another catalog (recorded, and said so)
FOREIGN = "foreign"

Action = Literal["write", "register", "sync", "gc", "optimize", "purge", "drop", "rename", "take over"]

_PAST = {"write": "written to", "gc": "garbage-collected", "optimize": "optimized", "purge": "purged",
         "register": "registered"}  # fmt: skip

_log = logging.getLogger("dal.claims")


@dataclass(frozen=True)
class Holder:
    """A catalog acting on a location: its id, its URL as it may be shown, and the dataset's name in it."""

    catalog: str
    url: str
    dataset: str


@dataclass(frozen=True)
class Claim:
    """Who owns a location, as its claim file says."""

    catalog: str
    url: str
    dataset: str
    claimed_at: str
    purging: bool = False
    history: tuple[Mapping[str, Any], ...] = field(default=())

    def held_by(self, holder: Holder) -> bool:
        return self.catalog == holder.catalog

    def describe(self) -> str:
        return f"catalog {self.url} (id {self.catalog[:8]}, as dataset {self.dataset!r})"

    def to_json(self) -> bytes:
        body = {
            "format": FORMAT_VERSION,
            "catalog": self.catalog,
            "catalog_url": self.url,
            "dataset": self.dataset,
            "claimed_at": self.claimed_at,
            "purging": self.purging,
            "history": list(self.history)[-MAX_HISTORY:],
        }
        return json.dumps(body, sort_keys=True, indent=1).encode()

    @classmethod
    def of(cls, holder: Holder) -> Claim:
        return cls(holder.catalog, holder.url, holder.dataset, datetime.now(UTC).isoformat(timespec="seconds"))


@dataclass(frozen=True)
class Checked:
    """What ``check`` found: the location's claim after it (None: unclaimed and not taken, or a read-only
    registration, which never reads it), and whether this check created it (the location had no claim). Callers
    learn both from the check's one read of the claim file, never by reading it again."""

    claim: Claim | None
    created: bool = False


def _parse(data: bytes, where: str) -> Claim:
    """A claim file's bytes as a Claim; anything else (not JSON, deep nesting, wrong types) is a FormatError."""
    bad = FormatError(
        f"{where} is not a claim dal can read; dal will not guess which catalog owns this location: check the "
        f"file, and remove it by hand only if no catalog records the dataset"
    )
    if len(data) > MAX_BYTES:
        raise bad
    try:
        body = json.loads(data, parse_constant=lambda _c: math.nan)
    except (ValueError, RecursionError) as e:
        raise bad from e
    if not isinstance(body, dict) or body.get("format") != FORMAT_VERSION:
        raise bad
    text = {k: body.get(k) for k in ("catalog", "catalog_url", "dataset", "claimed_at")}
    if not all(isinstance(v, str) and 0 < len(v) <= 2000 for v in text.values()):
        raise bad
    history = body.get("history", [])
    if not isinstance(body.get("purging", False), bool) or not isinstance(history, list):
        raise bad
    if not all(isinstance(h, dict) for h in history):
        raise bad
    return Claim(str(text["catalog"]), str(text["catalog_url"]), str(text["dataset"]), str(text["claimed_at"]),
                 bool(body.get("purging", False)), tuple(history))  # fmt: skip


def _where(loc: Location) -> str:
    from dal.storage.uris import mask_url

    return mask_url(loc.child(FILE))


def read(loc: Location) -> Claim | None:
    """The location's claim; None when it has none.

    Raises:
        FormatError: the claim file is a link, a folder, too large, or not a claim (dal will not guess).
    """
    if loc.local:
        path = loc.path(FILE)
        if os.path.islink(path) or os.path.isdir(path):
            raise FormatError(f"{_where(loc)} is a link or a folder, not a claim dal wrote; dal will not follow it")
    try:
        if not loc.exists(FILE):
            return None
        data = loc.read(FILE)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise FormatError(f"cannot read {_where(loc)} ({e})") from e
    return _parse(data, _where(loc))


def _replace(loc: Location, claim: Claim) -> None:
    """Put ``claim`` in place of the current one, never half-written: locally a temporary file renamed over it;
    an object store's PUT replaces the whole object."""
    data = claim.to_json()
    if not loc.local:
        loc.write(FILE, data)
        return
    loc.makedirs("")
    tmp = loc.path(f".{FILE}.{uuid.uuid4().hex[:12]}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, loc.path(FILE))


def _create(loc: Location, claim: Claim) -> bool:
    """Publish ``claim`` if the location has none (False: another catalog's is there). Locally an atomic
    create-if-absent (a hard link). On object stores a look, the PUT, and a read back that must find this claim:
    a conditional PUT would need the ``cloud`` extra's client and its credentials (a registration needed neither
    before claims, and without credentials that client asks the cloud's metadata server), and two catalogs
    claiming one new location within the same few milliseconds is the only case this leaves open."""
    if loc.local:
        return loc.create_exclusive(FILE, claim.to_json())
    if loc.exists(FILE):
        return False
    loc.write(FILE, claim.to_json())
    back = read(loc)
    return back is not None and back.catalog == claim.catalog


def _refusal(loc: Location, claim: Claim, holder: Holder, action: Action, recorded: bool) -> ClaimedElsewhere:
    here = f"this catalog ({holder.url}) may not {action} there; nothing was written or deleted."
    if recorded:  # this catalog records the dataset too (registered before locations were claimed, or taken over)
        ways = (f"Read it from that catalog, or move the claim to this one with `dal claim {holder.dataset} "
                "--take-over` (logged; that catalog can then only read it)")  # fmt: skip
    else:
        ways = (f"Read it from that catalog, or register it here read-only (`dal register {holder.dataset} "
                f"{loc.uri} --read-only`; `dal claim {holder.dataset} --take-over` then moves the claim, logged)")  # fmt: skip
    return ClaimedElsewhere(f"{loc.uri} belongs to another {claim.describe()}; {here} {ways}")


def check(
    loc: Location, holder: Holder, action: Action, *, recorded: bool, read_only: bool = False, take: bool = True
) -> Checked:
    """Refuse ``action`` unless ``holder``'s catalog owns the location; claim it first when nobody does. Reads the
    claim file once (once more only after creating it on an object store, or when another catalog won the race
    to create it); the result says what it found and whether it created the claim.

    Args:
        loc: the dataset's location.
        holder: the catalog acting and the dataset's name in it.
        action: what it is about to do (named in the refusal).
        recorded: whether that catalog records a dataset at the location now (a ``purging`` claim it no longer
            records is a purge stopped after its last step but one: the location is free again).
        read_only: the dataset is (being) registered read-only there: ``register``, ``sync``, ``drop`` and
            ``rename`` go on without a claim, anything else is refused.
        take: claim an unclaimed location (False: only check; an unclaimed location gives ``Checked(None)``).

    Raises:
        ClaimedElsewhere: another catalog owns the location. ReadOnlyDataset: a read-only registration asked to
            write or delete. PurgeUnfinished: a purge of it was stopped half-way (``purge`` itself goes on).
            FormatError: the claim file is not one dal can read.
    """
    if read_only:
        if action in ("register", "sync", "drop", "rename"):
            return Checked(None)
        raise ReadOnlyDataset(
            f"{holder.dataset} is registered read-only in this catalog ({holder.url}): it can be read, not "
            f"{_PAST.get(action, action)} from here (`dal claim {holder.dataset} --take-over` moves its location's claim here, logged)"
        )
    claim = read(loc)
    if claim is not None and claim.held_by(holder) and claim.purging and not recorded:
        _log.info("%s: the claim of a finished purge is released", loc.uri)
        claim = None
        if take:
            _replace(loc, Claim.of(holder))
            return Checked(read(loc))
    if claim is None:
        if not take:
            return Checked(None)
        mine = Claim.of(holder)
        if _create(loc, mine):
            _log.info("%s: claimed for %s", loc.uri, mine.describe())
            return Checked(mine, created=True)
        claim = read(loc)  # another catalog won the race to claim it
        if claim is None:
            raise FormatError(f"{_where(loc)} vanished while dal claimed the location; try again")
    return Checked(_held(loc, claim, holder, action, recorded))


def _held(loc: Location, claim: Claim, holder: Holder, action: Action, recorded: bool) -> Claim:
    """``claim`` when ``holder``'s catalog holds it and may ``action`` there (its dataset name kept true).

    Raises:
        ClaimedElsewhere, PurgeUnfinished: as ``check``.
    """
    if not claim.held_by(holder):
        raise _refusal(loc, claim, holder, action, recorded)
    if claim.purging and action not in ("purge", "drop"):
        raise PurgeUnfinished(
            f"{holder.dataset}: a purge of {loc.uri} was stopped half-way; nothing was written. Finish it with "
            f"`dal drop {holder.dataset} --purge`"
        )
    if claim.dataset != holder.dataset and action not in ("purge", "drop"):  # renamed since: keep the name true
        claim = replace(claim, dataset=holder.dataset)
        _replace(loc, claim)
    return claim


def mark_purging(loc: Location, holder: Holder) -> None:
    """Mark the location's claim ``purging`` before a purge deletes anything (claiming it if unclaimed).

    Raises:
        ClaimedElsewhere, FormatError: as ``check``.
    """
    claim = check(loc, holder, "purge", recorded=True).claim
    assert claim is not None
    if not claim.purging:
        _replace(loc, replace(claim, purging=True))


def unmark_purging(loc: Location, holder: Holder) -> None:
    """Undo ``mark_purging`` before anything was deleted (a purge that stopped itself)."""
    claim = read(loc)
    if claim is not None and claim.held_by(holder) and claim.purging:
        _replace(loc, replace(claim, purging=False))


def release(loc: Location, holder: Holder) -> bool:
    """Remove the claim if ``holder``'s catalog holds it (a drop or a finished purge); True if one was removed.
    A claim of another catalog, a link or a file that is not a claim is left alone."""
    try:
        claim = read(loc)
    except FormatError:
        return False
    if claim is None or not claim.held_by(holder):
        return False
    try:
        loc.delete(FILE)
    except FileNotFoundError:
        return False
    return True


def take_over(loc: Location, holder: Holder, reason: str) -> Claim:
    """Move the location's claim to ``holder``'s catalog, recording the previous owner and ``reason`` in the
    claim's history (and the log). The previous catalog may still read; it may no longer write or delete.

    Raises:
        FormatError: the claim file is not one dal can read (dal will not overwrite what it did not write).
        PurgeUnfinished: the other catalog is purging the location (or its purge was stopped half-way): taken
            over, the purge would go on deleting in this catalog's location, under its writes.
    """
    claim = read(loc)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    if claim is not None and claim.held_by(holder):
        return claim
    if claim is not None and claim.purging:
        raise PurgeUnfinished(
            f"{loc.uri} is being purged by {claim.describe()} (or its purge was stopped half-way); the claim was "
            f"not taken over. Finish the purge there (`dal drop {claim.dataset} --purge`); only if that catalog is "
            f"gone, remove {FILE} by hand (the table may have lost data files)"
        )
    history: list[Mapping[str, Any]] = list(claim.history) if claim is not None else []
    if claim is not None:
        history.append({"from": claim.url, "from_id": claim.catalog, "as": claim.dataset, "to": holder.url,
                        "to_id": holder.catalog, "at": now, "reason": reason[:500]})  # fmt: skip
    mine = Claim(holder.catalog, holder.url, holder.dataset, now, False, tuple(history))
    if claim is None and _create(loc, mine):
        return mine
    _replace(loc, mine)
    _log.warning(
        "%s: claim taken over by %s from %s (%s)", loc.uri, mine.describe(),
        claim.describe() if claim is not None else "nobody", reason,
    )  # fmt: skip
    return mine


def is_claim(rel: str) -> bool:
    """Whether ``rel`` (relative to a location) is the claim file or a temporary one of its own."""
    return rel == FILE or (rel.startswith(f".{FILE}.") and rel.endswith(".tmp"))


__all__ = ["FILE", "Checked", "Claim", "ClaimedElsewhere", "Holder", "PurgeUnfinished", "check", "is_claim", "mark_purging",
           "read", "release", "take_over", "unmark_purging"]  # fmt: skip
