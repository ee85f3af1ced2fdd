"""Hostile values for the fuzzers: strings that break parsers, terminals, SQL and paths, and values of the
wrong type. Drawn with a seeded ``random.Random``, so a run is reproducible from its seed."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np

SEED = 20261122
BUDGET_S = 12.0  # each fuzzer stops drawing after this long (hundreds of cases on a loaded 2-core machine)

HOSTILE_STRINGS: tuple[str, ...] = (
    "",
    " ",
    "ds",
    "ds\n",
    "cam\n",
    "\ncam",
    "ds\r\n",
    "\x1b[31mred\x1b[0m",
    "\x1b]0;title\x07",
    "\x00",
    "ds\x00",
    "a" * 5000,
    "99999999999999999999",
    "-1",
    "0",
    "1.5",
    "1e400",
    "²",
    "٣",
    "\uff11",
    "NaN",
    "inf",
    "latest",
    "' OR 1=1 --",
    "'; DROP TABLE dal_datasets; --",
    'x" OR "1"="1',
    "%s%n%x",
    "{0}{name}",
    "[bold red]markup[/]",
    "\u202eevil",
    "\u200b",
    "../../etc/passwd",
    "..",
    ".",
    "/",
    "a/b",
    "a\\b",
    "*",
    "%",
    "_",
    "2026-13-45",
    "9999-12-31T23:59:59",
    "0001-01-01",
    "id = 1.5",
    "id >",
    "s = 'x",
    "(((((((((((",
    "id in (1, 2, ",
    "s3://AKID:secret@bucket/x",
    "memory://bucket/x?secret=abc",
    "nosuch://x/y",
    "prod",
    "id",
    "s",
    "ts",
)

OTHER_VALUES: tuple[Any, ...] = (
    None,
    0,
    -1,
    1,
    3,
    2**64,
    -(2**64),
    10**100,
    1.5,
    float("nan"),
    float("inf"),
    True,
    False,
    b"bytes",
    bytearray(b"x"),
    [],
    {},
    ["id"],
    ("id", "s"),
    {"a": 1},
    {"id"},
    np.int64(2),
    np.float32(1.5),
    datetime(2026, 1, 1, tzinfo=UTC),
    datetime(1, 1, 1),
    date(2026, 1, 2),
    timedelta(hours=1),
    object(),
    Ellipsis,
    lambda: 1,
)


def hostile(rng: random.Random) -> Any:
    """A hostile string two times in three, else a value of a surprising type."""
    if rng.random() < 2 / 3:
        return rng.choice(HOSTILE_STRINGS)
    return rng.choice(OTHER_VALUES)


def hostile_str(rng: random.Random) -> str:
    return rng.choice(HOSTILE_STRINGS)


def budget(seconds: float = BUDGET_S, at_least: int = 30) -> Iterator[int]:
    """Case numbers until ``seconds`` have passed (and at least ``at_least`` cases ran)."""
    start = time.monotonic()
    i = 0
    while i < at_least or time.monotonic() - start < seconds:
        yield i
        i += 1


def describe(call: Callable[..., Any] | str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    name = call if isinstance(call, str) else getattr(call, "__qualname__", repr(call))
    shown = [repr(a)[:60] for a in args] + [f"{k}={v!r}"[:60] for k, v in kwargs.items()]
    return f"{name}({', '.join(shown)})"
