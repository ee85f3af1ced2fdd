"""Connecting to a PostgreSQL catalog that refuses connections for now: retried with jittered exponential backoff.

The ranks of a training job start together and each pins its version (``dal.open``); a server at
``max_connections``, a role at its ``CONNECTION LIMIT`` or a pooler at its client limit refuses some of them for a
moment, and a server that restarts refuses everyone for a few seconds. Those refusals are retried until
``DAL_CATALOG_RETRY_S`` seconds (default 30; 0: never) have passed since the first attempt, each wait a random
time below a ceiling that doubles from 50 ms to 2 s ("full jitter": refused processes do not come back in step).
Anything waiting cannot cure (authentication, a role or database that does not exist, a host name that does not
resolve) is raised at once, unchanged, so the caller reports it as it always did.

libpq gives a refused connection no SQLSTATE, so what is transient is read from its message: PostgreSQL's own
(English; a server whose ``lc_messages`` is another language is not recognised, and fails at once as before),
PgBouncer's, and the system's "Connection refused". ``window`` gives every connection made inside it one shared
deadline (``dal.open`` may try the quick reader, then ``Catalog``: together they wait at most the budget).

Plain Python (no SQLAlchemy, no driver): ``dal.catalog.lite`` and ``dal.catalog.engine`` both use it.
"""

from __future__ import annotations

import logging
import math
import os
import random
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

from dal.catalog.errors import CatalogError, CatalogUnavailable

ENV = "DAL_CATALOG_RETRY_S"
DEFAULT_S = 30.0
FIRST_DELAY_S = 0.05
MAX_DELAY_S = 2.0
# refusals that end by themselves: no connection slot free (server, role, database, pooler), a server starting,
# stopping or recovering, nothing listening (a server between stop and start)
TRANSIENT = re.compile(
    r"too many connections|too many clients|remaining connection slots are reserved|no more connections allowed"
    r"|the database system is (?:starting up|shutting down|in recovery mode|not yet accepting connections)"
    r"|connection refused",
    re.IGNORECASE,
)
# ... unless the same message also says something waiting cannot cure (libpq reports every address it tried)
LASTING = re.compile(
    r"authentication failed|does not exist|no pg_hba\.conf entry|permission denied|not permitted to log in",
    re.IGNORECASE,
)
_T = TypeVar("_T")
_log = logging.getLogger("dal.catalog")
_random = random.SystemRandom()  # never the same sequence in forked ranks
_deadline: ContextVar[float | None] = ContextVar("dal_catalog_retry_deadline", default=None)


def budget() -> float:
    """Seconds to keep retrying a refused connection (``$DAL_CATALOG_RETRY_S``, default 30).

    Raises:
        CatalogError: the variable is not a number of seconds, 0 or more.
    """
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return DEFAULT_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not (0 <= seconds < math.inf):
        raise CatalogError(f"{ENV} must be a number of seconds, 0 or more, not {raw[:40]!r}")
    return seconds


def transient(error: BaseException) -> bool:
    """Whether a failed connection attempt is a refusal for now (see the module's docstring)."""
    text = str(error)
    return TRANSIENT.search(text) is not None and LASTING.search(text) is None


@contextmanager
def window() -> Iterator[None]:
    """One deadline (now + ``budget()``) for every connection made inside, in this thread; nested: the outer one."""
    if _deadline.get() is not None:
        yield
        return
    token = _deadline.set(time.monotonic() + budget())
    try:
        yield
    finally:
        _deadline.reset(token)


def connect(attempt: Callable[[], _T], where: str, *, patience: float | None = None) -> _T:
    """``attempt()``'s connection, attempted again after a refusal for now until the deadline (``window``'s, else
    ``patience`` or ``budget()`` seconds from now).

    Args:
        attempt: makes one connection (raises the driver's error).
        where: the catalog URL, masked, for messages.
        patience: seconds to retry for, instead of ``budget()`` (0: one attempt).

    Raises:
        CatalogUnavailable: still refused at the deadline (naming the refusal and ``DAL_CATALOG_RETRY_S``).
        Exception: anything else ``attempt`` raised, at once and unchanged.
    """
    started = time.monotonic()
    deadline = _deadline.get()
    if deadline is None or patience is not None:
        deadline = min(deadline or math.inf, started + (budget() if patience is None else patience))
    tries = 0
    while True:
        tries += 1
        try:
            return attempt()
        except Exception as e:
            if not transient(e):
                raise
            refusal = (str(e).strip().splitlines() or [type(e).__name__])[0]
            now = time.monotonic()
            if now >= deadline:
                raise CatalogUnavailable(
                    f"catalog {where} failed: {refusal} (still refused after {tries} attempt"
                    f"{'s' if tries > 1 else ''} in {now - started:.1f} s; {ENV} sets how long dal retries)"
                ) from e
            wait = min(_random.uniform(0, min(MAX_DELAY_S, FIRST_DELAY_S * 2 ** (tries - 1))), deadline - now)
            _log.debug("catalog %s refused a connection for now (%s); retrying in %.2f s", where, refusal, wait)
            time.sleep(wait)
