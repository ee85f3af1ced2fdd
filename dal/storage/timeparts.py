"""Time partitions: when a ``date=…`` (and ``hour=…``) directory is known to hold only rows of that day (hour)
of the time column, in a known time zone — the only case in which a window may skip whole partitions.

A directory name is not proof: Spark's ``to_date(ts)`` cuts days in the session's time zone, an ingestion
date has nothing to do with the rows' times, and a ``date=`` column may be anything. So ``dal.plan`` prunes
time partitions only under a ``TimePartitions`` rule that is

- *proven*: ``dal.write`` checked every row it wrote (``RuleCheck``: the day, and hour, of the time column in
  the zone equal the partition values) and the version it extends had the same rule; recorded in the
  version's properties (``VERSION_KEY``), or
- *declared*: by the user (``dal.write(..., time_partitions=…)`` / ``dal.register(..., time_partitions=…)``),
  kept in the dataset's properties (``DATASET_KEY``); dal's own writes to such a dataset are checked against
  it and refused when a row breaks it.

Otherwise a window is an ordinary filter, pushed down to partition values and row-group statistics.
Rows whose time is null are in no window, so they never break a rule; a null partition value is never pruned.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pyarrow as pa
import pyarrow.compute as pc

from dal.errors import DalError, SchemaMismatch

VERSION_KEY = "dal.time_partitions"  # a version's proven rule (JSON text)
DATASET_KEY = "dal.time_partitions"  # a dataset's declared rule (JSON text)
DAY_NAMES = ("date", "day", "dt", "ds")  # partition columns dal tries as the day of the time column
HOUR_NAMES = ("hour",)
_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def check(value: object) -> TimePartitions | None:
    """``value`` if it is None or a ``TimePartitions``, else a DalError (a public function's argument)."""
    if value is not None and not isinstance(value, TimePartitions):
        raise DalError(
            f"time_partitions must be a dal.TimePartitions (e.g. TimePartitions(day='date', zone='UTC')), "
            f"not {type(value).__name__}"
        )
    return value


def _zone(name: object) -> ZoneInfo:
    if not isinstance(name, str) or not name:
        raise DalError(f"time_partitions zone must be an IANA time zone name such as 'UTC', not {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise DalError(
            f"unknown time zone {name!r}: name an IANA zone such as 'UTC' or 'America/Los_Angeles'"
        ) from None


@dataclass(frozen=True)
class TimePartitions:
    """Partition ``day`` holds the day (``YYYY-MM-DD``, or a date column), and partition ``hour`` (optional) the
    hour (0-23), of the time column ``column`` in time zone ``zone`` — for every row whose time is not null.

    Passed as ``dal.write(..., time_partitions=TimePartitions(day="date", hour="hour", zone="UTC"))`` or to
    ``dal.register``, it declares the rule for the dataset: windows then skip the partitions outside them, and
    dal's writes to the dataset are refused when a row breaks it.

    Args:
        day: the partition column holding the day.
        hour: the partition column holding the hour, if any.
        zone: the IANA time zone the days and hours are cut in.
        column: the time column; None: the dataset's (filled in when the rule is recorded).

    Raises:
        DalError: an empty or non-string column name, ``day`` and ``hour`` naming one column, an unknown zone.
    """

    day: str
    hour: str | None = None
    zone: str = "UTC"
    column: str | None = None

    def __post_init__(self) -> None:
        for what, value in (("day", self.day), ("hour", self.hour), ("column", self.column)):
            if value is not None and (not isinstance(value, str) or not value):
                raise DalError(f"time_partitions {what} must name a column, not {value!r}")
        if self.hour is not None and self.hour == self.day:
            raise DalError("time_partitions day and hour must be two columns")
        _zone(self.zone)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: object) -> TimePartitions | None:
        """The rule ``text`` records, or None when it records none dal can use (then nothing is pruned)."""
        try:
            d = json.loads(text) if isinstance(text, str) else None
            return cls(**d) if isinstance(d, dict) else None
        except (ValueError, TypeError, DalError):
            return None

    def of(self, column: str) -> TimePartitions:
        """This rule for time column ``column``."""
        return TimePartitions(self.day, self.hour, self.zone, column)

    @property
    def partitions(self) -> tuple[str, ...]:
        return (self.day,) if self.hour is None else (self.day, self.hour)

    def describe(self) -> str:
        cut = f"{self.day}= day" + (f", {self.hour}= hour" if self.hour else "")
        return f"{cut} of {self.column or 'the time column'} in {self.zone}"

    # -- reading: the instants a partition can hold ----------------------------------------------------

    def interval(self, values: Mapping[str, str | None]) -> tuple[datetime, datetime] | None:
        """The UTC instants [lo, hi) rows of a partition with these values can have (None: not known)."""
        day = values.get(self.day)
        if day is None or not _ISO_DAY.fullmatch(day):
            return None
        try:
            d = date.fromisoformat(day)
        except ValueError:
            return None
        zone = ZoneInfo(self.zone)
        if self.hour is None:
            return _instant(datetime(d.year, d.month, d.day), zone, lo=True), _instant(
                datetime(d.year, d.month, d.day) + timedelta(days=1), zone, lo=False
            )
        h = values.get(self.hour)
        if h is None or not h.strip().isdigit() or not 0 <= int(h) <= 23:
            return None
        wall = datetime(d.year, d.month, d.day, int(h))
        return _instant(wall, zone, lo=True), _instant(wall + timedelta(hours=1), zone, lo=False)

    # -- writing: does a batch keep the rule? ------------------------------------------------------------

    def broken(self, batch: pa.RecordBatch | pa.Table) -> int:
        """How many rows of ``batch`` break the rule (a row with a time and partition values that are not
        its day / hour). Raises ``DalError`` when the columns cannot hold such a rule (missing, wrong type)."""
        assert self.column is not None
        names = batch.schema.names
        for c in (self.column, *self.partitions):
            if c not in names:
                raise SchemaMismatch(f"time_partitions: {c!r} is not a column of the data")
        local = _local(batch.column(names.index(self.column)), self.zone, self.column)
        day = batch.column(names.index(self.day))
        want_day = local.cast(pa.date32())
        if pa.types.is_date32(day.type) or pa.types.is_date64(day.type):
            bad = pc.not_equal(want_day, day.cast(pa.date32()))
        elif pa.types.is_string(day.type) or pa.types.is_large_string(day.type):
            # few distinct values: each parsed once (formatting every row's date as text costs 6x more)
            encoded = pc.dictionary_encode(day)
            chunks = encoded.chunks if isinstance(encoded, pa.ChunkedArray) else [encoded]
            try:
                parsed = [pc.take(c.dictionary.cast(pa.date32()), c.indices) for c in chunks]
            except pa.ArrowInvalid:  # a value that is no YYYY-MM-DD date: no row of the batch proves the rule
                return int(batch.num_rows)
            bad = pc.not_equal(want_day, pa.chunked_array(parsed, pa.date32()))
        else:
            raise SchemaMismatch(
                f"time_partitions: day column {self.day!r} is {day.type}; it must be a date or a string"
            )
        if self.hour is not None:
            hour = batch.column(names.index(self.hour))
            want_hour = pc.hour(local)
            if pa.types.is_integer(hour.type):
                bad = pc.or_kleene(bad, pc.not_equal(want_hour, hour.cast(pa.int64())))
            elif pa.types.is_string(hour.type) or pa.types.is_large_string(hour.type):
                bad = pc.or_kleene(bad, pc.not_equal(want_hour.cast(pa.string()), hour.cast(pa.string())))
            else:
                raise SchemaMismatch(
                    f"time_partitions: hour column {self.hour!r} is {hour.type}; it must be an integer"
                )
        # null time (in no window) or null partition value (never pruned): not a break
        return int(pc.sum(pc.fill_null(bad, False).cast(pa.int64())).as_py() or 0)


def _instant(wall: datetime, zone: ZoneInfo, *, lo: bool) -> datetime:
    """The UTC instant of a local wall time: for ``lo`` the earliest, otherwise the latest, of its readings
    (a wall time a clock change repeats or skips has two): [lo, hi) then holds every instant of the span."""
    a = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    b = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    return min(a, b) if lo else max(a, b)


def _local(column: pa.Array | pa.ChunkedArray, zone: str, name: str) -> Any:
    """The wall-clock time of ``column`` (timestamps, naive ones UTC; dates; epoch seconds) in ``zone``."""
    t = column.type
    if pa.types.is_date(t):
        column, t = column.cast(pa.timestamp("s")), pa.timestamp("s")  # a date is its midnight UTC
    elif pa.types.is_integer(t):
        column, t = column.cast(pa.int64()).cast(pa.timestamp("s")), pa.timestamp("s")  # epoch seconds
    if not pa.types.is_timestamp(t):
        raise SchemaMismatch(
            f"time_partitions: time column {name!r} is {t}; it must be a timestamp, date or epoch seconds"
        )
    utc = column.cast(pa.timestamp(t.unit, "UTC"))  # naive values are UTC: the same numbers
    return pc.local_timestamp(utc.cast(pa.timestamp(t.unit, zone)))


# -- finding the rule of a version --------------------------------------------------------------------


def rule_of(version_properties: Mapping[str, Any], dataset_properties: Mapping[str, Any]) -> TimePartitions | None:
    """The rule a version's partitions follow: proven at write (the version's), else declared (the dataset's)."""
    proven = TimePartitions.from_json(version_properties.get(VERSION_KEY))
    return proven if proven is not None else TimePartitions.from_json(dataset_properties.get(DATASET_KEY))


def prunable(rule: TimePartitions | None, column: str, partition_columns: Sequence[str]) -> bool:
    """Whether ``rule`` may prune a window on ``column`` of a version partitioned by ``partition_columns``."""
    return rule is not None and rule.column == column and all(p in partition_columns for p in rule.partitions)


# -- proving a rule while writing ---------------------------------------------------------------------


def candidates(time_column: str, partition_columns: Sequence[str], zones: Iterable[str]) -> list[TimePartitions]:
    """The rules a write partitioned by ``partition_columns`` may prove: its first day-named partition (and an
    ``hour`` partition) in each of ``zones`` (unknown zone names are skipped), most preferred first."""
    day = next((c for c in partition_columns if c.lower() in DAY_NAMES), None)
    if day is None:
        return []
    hour = next((c for c in partition_columns if c.lower() in HOUR_NAMES), None)
    out: list[TimePartitions] = []
    for z in dict.fromkeys(zones):
        try:
            rule = TimePartitions(day, hour, z, time_column)
        except DalError:
            continue
        out.append(rule)
    return out


@dataclass
class RuleCheck:
    """Which of ``rules`` every row seen so far keeps (picklable: Spark's executors each check their rows and
    hand back ``alive``). ``declared``: a row that breaks the one rule is an error, not a fact to record."""

    rules: list[TimePartitions]
    declared: bool = False
    alive: list[bool] = field(default_factory=list)
    error: SchemaMismatch | None = None  # the refusal ``see`` raised (a writer that wraps errors re-raises it)

    def __post_init__(self) -> None:
        if not self.alive:
            self.alive = [True] * len(self.rules)

    def see(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Check one batch of the rows written (raises ``SchemaMismatch`` for a declared rule a row breaks)."""
        if batch.num_rows == 0:
            return
        for i, rule in enumerate(self.rules):
            if not self.alive[i]:
                continue
            try:
                broken = rule.broken(batch)
            except SchemaMismatch as e:
                if self.declared:
                    self.error = e
                    raise
                broken = 1  # columns that cannot hold the rule: nothing proven
            if broken and self.declared:
                self.error = SchemaMismatch(
                    f"{broken} row(s) break the declared time partitions ({rule.describe()}): their "
                    f"{'/'.join(rule.partitions)} value is not the day{'/hour' if rule.hour else ''} of {rule.column}"
                )
                raise self.error
            if broken:
                self.alive[i] = False

    def seen(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            self.see(b)
            yield b

    def merge(self, alive: Sequence[bool]) -> None:
        """Add another process's findings (a Spark task's ``alive``)."""
        self.alive = [a and b for a, b in zip(self.alive, alive, strict=True)]

    def proven(self) -> TimePartitions | None:
        """The most preferred rule every row kept (None: none)."""
        return next((r for r, ok in zip(self.rules, self.alive, strict=True) if ok), None)

    def encode(self) -> int:
        return sum(1 << i for i, ok in enumerate(self.alive) if ok)

    def decode(self, bits: int) -> list[bool]:
        return [bool(bits >> i & 1) for i in range(len(self.rules))]
