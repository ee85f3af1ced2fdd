"""Sampling: per-epoch row selections of a scan, and the "virtual rows" the feed reads any stream through.

A *virtual row source* (``Rows``) numbers one epoch's rows 0…total-1 in reading order, cut into chunks,
and reads rows ``[a, b)`` by reading only the chunks that hold them. Three kinds exist: a scan's rows
(``ScanRows``: its row groups in epoch order), a sampled or class-balanced selection of them
(``PickRows``), and an interleave of several sources (``dal.mix``). The feed (``dal.read.feed``) shards,
splits between workers, resumes and cuts canonical shards on that numbering alone, so every guarantee
of a plain scan holds for a sample or a mix.

``Scan.sample(fraction=f)`` — a two-stage draw with inclusion probability exactly ``f`` per row: each row
group is picked with probability ``p = min(1, max(spread·f, MIN_PICKED/G))`` (G row groups: at least
MIN_PICKED picked on average, so a dataset of few row groups does not swing between empty and whole
epochs), then each row of a picked group with
probability ``f/p`` (with ``replace=True``: Poisson(f/p) copies of it). ``Scan.sample(rows=n)`` — row
groups in a seeded random order, ``spread·n`` of their rows covered by ``windows`` (default 16, at most one
per row group) equal windows evenly spaced around them from a uniformly random start (wrapping around), then
exactly ``n`` rows drawn among the covered ones (per row group, as many as a uniform draw among the covered
rows gives; which ones, uniformly in the row group): every row's chance is exactly n/N, and an epoch's rows
come from row groups all over the scan (one window, ``windows=1``, reads the fewest row groups but draws an
epoch from a few neighbouring row groups: e.g. 1-2 days of a time-partitioned dataset). ``Scan.balance(by, weights)`` — per class ``c`` exactly
``k_c = rows · w_c / Σw`` rows (largest remainder), drawn uniformly among the class's rows, from per
(row group, class) counts made once per pinned version by a pass that reads only ``by`` (and the filter
columns). Every count is decided before any data column is read, from footers (or those counting passes),
so every rank knows the epoch's length; unpicked row groups are never read. Which rows of a picked row
group are taken is drawn when it is read, by a generator seeded by (seed, epoch, row group): the whole
selection is a pure function of (seed, epoch, version, filters).

Why one module: the three virtual row sources (scan rows, picked rows, mixed rows) share the chunk arithmetic
that maps a row range to the chunks holding it.
"""

from __future__ import annotations

import bisect
import concurrent.futures as cf
import json
import math
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dal.errors import DalError, FilterError, check_int, one_line
from dal.read import reader
from dal.read.pinned import translate_missing
from dal.read.plan import Query
from dal.read.sharding import share
from dal.read.tasks import ReadTask

T = TypeVar("T")
SAMPLE_TAG, BALANCE_TAG = 0x5A, 0xBA  # separate random streams per use
MAX_CLASSES = 10_000
MAX_ROWS = 2**62  # rows= arguments (larger is no epoch anyone reads; numpy draws take int64)
MAX_DRAW = 10**9 - 1  # numpy's exact multivariate hypergeometric draw: fewer than 10**9 rows to draw among
NAN = float("nan")  # the one NaN class of a floating-point balance column (NaN != NaN: one key for all)
DEFAULT_SPREAD = 4.0
DEFAULT_WINDOWS = 16  # sample(rows=n): the windows an epoch's rows are drawn from, spread over the scan
MAX_WINDOWS = 1_000_000
MIN_PICKED = 16  # a fraction sample picks at least this many row groups on average (all when fewer)


def pick_probability(fraction: float, spread: float, groups: int) -> float:
    """The probability a fraction sample picks a row group: spread·f, raised so that about MIN_PICKED of the
    ``groups`` are picked (with one row group: 1, i.e. a plain row-by-row draw)."""
    return min(1.0, max(spread * fraction, MIN_PICKED / max(groups, 1)))


RAW_ROWS = 4  # a chunk of a sample reads at most RAW_ROWS x the chunk's target rows (then takes its picks)
Unit = Callable[[], pa.Table]


@dataclass(frozen=True)
class Sample:
    """``Scan.sample``'s arguments (validated)."""

    seed: int
    fraction: float | None = None
    rows: int | None = None
    replace: bool = False
    spread: float = DEFAULT_SPREAD
    windows: int = DEFAULT_WINDOWS


@dataclass(frozen=True)
class Balance:
    """``Scan.balance``'s arguments (validated); ``weights`` None: every class alike."""

    by: str
    seed: int
    weights: tuple[tuple[Any, float], ...] | None = None
    rows: int | None = None
    replace: bool = False


Selection = Sample | Balance


def describe(selection: Selection | None) -> Any:
    """A JSON form of a selection (what a loader state records)."""
    if selection is None:
        return None
    out = {"kind": type(selection).__name__.lower(), **asdict(selection)}
    return json.loads(json.dumps(out, default=str))


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise FilterError(f"{what} must be a number, not {type(value).__name__} {str(value)[:60]}")
    out = float(value)
    if not math.isfinite(out):
        raise FilterError(f"{what} must be finite, not {out}")
    return out


def _flag(value: object, what: str) -> bool:
    if not isinstance(value, bool):
        raise FilterError(f"{what} must be True or False, not {value!r}")
    return value


def check_sample(
    fraction: object, rows: object, seed: object, replace: object, spread: object, windows: object = None
) -> Sample:
    """``Scan.sample``'s arguments, or a FilterError naming the bad one."""
    if (fraction is None) == (rows is None):
        raise FilterError("sample needs exactly one of fraction= or rows=")
    if windows is not None and fraction is not None:
        raise FilterError("sample windows= applies to rows=: a fraction sample picks row groups all over the scan")
    w = DEFAULT_WINDOWS if windows is None else check_int(windows, "sample windows", minimum=1, maximum=MAX_WINDOWS)
    seed = check_int(seed, "sample seed", minimum=0, maximum=2**63 - 1)
    replace = _flag(replace, "sample replace")
    s = _number(spread, "sample spread") if not (isinstance(spread, float) and spread == math.inf) else math.inf
    if s < 1:
        raise FilterError(f"sample spread must be >= 1 (row groups picked per row group needed), not {s}")
    if fraction is not None:
        f = _number(fraction, "sample fraction")
        if not 0 < f <= 1:
            raise FilterError(f"sample fraction must be in (0, 1], not {f}")
        return Sample(seed, fraction=f, replace=replace, spread=s)
    n = check_int(rows, "sample rows", minimum=1, maximum=MAX_ROWS)
    return Sample(seed, rows=n, replace=replace, spread=s, windows=w)


def check_balance(by: object, weights: object, rows: object, seed: object, replace: object) -> Balance:
    """``Scan.balance``'s arguments (the column is checked by the scan), or a FilterError."""
    if not isinstance(by, str):
        raise FilterError(f"balance by must be a column name, not {type(by).__name__}")
    seed = check_int(seed, "balance seed", minimum=0, maximum=2**63 - 1)
    replace = _flag(replace, "balance replace")
    n = check_int(rows, "balance rows", minimum=1, maximum=MAX_ROWS) if rows is not None else None
    if weights is None or (isinstance(weights, str) and weights == "uniform"):  # `array == str` is elementwise
        return Balance(by, seed, None, n, replace)
    if not isinstance(weights, dict) or not weights:
        shown = one_line(repr(weights))[:80]
        raise FilterError(
            f"balance weights must be 'uniform' or a non-empty dict class -> weight, not {type(weights).__name__} {shown}"
        )
    pairs = []
    for k, w in weights.items():
        value = _number(w, f"balance weight of class {k!r}")
        if value < 0:
            raise FilterError(f"balance weight of class {k!r} is negative ({value})")
        pairs.append((class_key(k.item() if isinstance(k, np.generic) else k), value))
    if not any(w > 0 for _, w in pairs):
        raise FilterError("balance weights are all zero: give at least one class a positive weight")
    return Balance(by, seed, tuple(pairs), n, replace)


def class_key(value: Any) -> Any:
    """A class value as a dict key: every NaN is the one ``NAN`` (NaN != NaN would make each its own class)."""
    return NAN if isinstance(value, float) and value != value else value


def check_balance_column(scan: Any, b: Balance) -> None:
    """The class column and the weights' keys against the scan's schema (before any read), or a FilterError:
    a tensor field, a list, struct, map or binary column holds no classes; a key must be a value of the
    column's type."""
    field = scan.dataset.schema.get(b.by)
    codec = getattr(field, "codec", None)
    if codec not in (None, "scalar"):
        raise FilterError(
            f"balance by {b.by!r}: a tensor field ({codec} codec) holds no classes; balance by a label column"
        )
    typ = scan.arrow_schema.field(b.by).type
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    if not (
        pa.types.is_integer(typ)
        or pa.types.is_boolean(typ)
        or pa.types.is_string(typ)
        or pa.types.is_large_string(typ)
        or pa.types.is_floating(typ)
        or pa.types.is_date(typ)
        or pa.types.is_timestamp(typ)
        or pa.types.is_decimal(typ)
    ):
        raise FilterError(
            f"balance by {b.by!r}: a {typ} column holds no classes; balance by an integer, string, bool, float, "
            "date or timestamp column"
        )
    for k, _w in b.weights or ():
        if k is None:
            continue
        fractional = isinstance(k, float) and not k.is_integer()
        if isinstance(k, bool) != pa.types.is_boolean(typ) or (fractional and pa.types.is_integer(typ)):
            raise FilterError(f"balance weights: class {k!r} is not a value of {b.by!r} ({typ})")
        try:
            pa.array([k], typ)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            raise FilterError(f"balance weights: class {k!r} is not a value of {b.by!r} ({typ})") from None


def _class_column(column: pa.Array) -> pa.Array:
    """The class column as compared: -0.0 is 0.0 (a dict sees them as one key, Arrow's hashing does not)."""
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if pa.types.is_floating(column.type) and not pa.types.is_float16(column.type):
        column = pc.add(column, pa.scalar(0.0, column.type))
    return column


def hypergeometric(rng: np.random.Generator, colors: np.ndarray, n: int, what: str) -> np.ndarray:
    """``n`` rows drawn without replacement among ``colors`` rows of each kind (counts per kind)."""
    if int(colors.sum()) > MAX_DRAW:
        raise DalError(
            f"{what}: an exact draw among {int(colors.sum()):,} rows is not supported (at most {MAX_DRAW:,}: "
            "numpy's multivariate hypergeometric); filter the scan, or draw with replace=True"
        )
    return rng.multivariate_hypergeometric(colors, n)


def apportion(total: int, weights: Sequence[float]) -> list[int]:
    """``total`` split in proportion to ``weights`` (largest remainder; the parts sum to ``total``)."""
    w = np.asarray(weights, dtype=np.float64)
    exact = w / w.sum() * total
    base = np.floor(exact).astype(np.int64)
    left = int(total - base.sum())
    if left > 0:
        base[np.argsort(-(exact - base), kind="stable")[:left]] += 1
    return [int(x) for x in base]


def _task_seed(task: ReadTask, seed: int, epoch: int, tag: int) -> list[int]:
    return [seed, epoch, tag, zlib.crc32(task.uri.encode()), task.row_group, task.offset]


# -- virtual rows ---------------------------------------------------------------------------------------


class Rows:
    """One epoch's rows numbered 0…total-1, in chunks: chunk i holds rows ``[starts[i], starts[i+1])``.

    ``rows(a, b)`` reads only the chunks holding them; the last few chunks are kept (thread-safe: units
    are read on several reader threads, and neighbouring units share chunks)."""

    KEEP = 4

    def __init__(self, starts: list[int]) -> None:
        self.starts = starts
        self.total = starts[-1] if starts else 0
        self._lock = threading.Lock()
        self._cache: OrderedDict[int, cf.Future[pa.Table]] = OrderedDict()

    @property
    def chunks(self) -> int:
        return max(len(self.starts) - 1, 0)

    def read_chunk(self, i: int) -> pa.Table:  # pragma: no cover - abstract
        raise NotImplementedError

    def chunk(self, i: int) -> pa.Table:
        with self._lock:
            future = self._cache.get(i)
            owner = future is None
            if future is None:
                future = self._cache[i] = cf.Future()
                while len(self._cache) > self.KEEP:
                    self._cache.popitem(last=False)
            else:
                self._cache.move_to_end(i)
        if owner:
            try:
                future.set_result(self.read_chunk(i))
            except BaseException as e:
                future.set_exception(e)
                with self._lock:
                    self._cache.pop(i, None)
        return future.result()

    def rows(self, start: int, stop: int) -> list[pa.Table]:
        """Rows ``[start, stop)`` (0 <= start <= stop <= total) as slices of their chunks."""
        return reader.slice_chunks(self.starts, self.chunk, start, stop)

    def __getstate__(self) -> dict[str, Any]:  # DataLoader workers: no lock, no cached chunks
        state = dict(self.__dict__)
        state.pop("_lock"), state.pop("_cache")
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock, self._cache = threading.Lock(), OrderedDict()


def _starts(counts: Sequence[int], spans: Sequence[tuple[int, int]]) -> list[int]:
    starts = [0]
    for a, b in spans:
        starts.append(starts[-1] + sum(counts[a:b]))
    return starts


class ScanRows(Rows):
    """A plain scan's epoch: its row groups in epoch order (``tasks``), chunked as it streams them (``spans``)."""

    def __init__(
        self,
        query: Query,
        tasks: list[ReadTask],
        spans: list[tuple[int, int]],
        counts: Sequence[int],
        permute: tuple[int, int] | None,
    ) -> None:
        self.query, self.tasks, self.spans, self.permute = query, tasks, spans, permute
        super().__init__(_starts(counts, spans))

    def read_chunk(self, i: int) -> pa.Table:
        a, b = self.spans[i]
        with translate_missing(self.query.source):
            table = reader.read_span(self.query, self.tasks[a:b])
        return reader.combine([table], self.tasks[a], self.permute)


class PickRows(Rows):
    """A sampled or balanced scan's epoch: the picked rows of the picked row groups, in the scan's epoch
    order (row groups permuted and rows permuted inside each chunk when shuffled)."""

    def __init__(self, source: Any) -> None:
        whole = source.with_shard(None)  # a dal.read.source.Picked
        selection: Selection = whole.selection
        self.selection, self.epoch = selection, whole.epoch
        self.columns = whole.output_names
        columns = whole.columns
        if isinstance(selection, Balance) and columns is not None and selection.by not in columns:
            columns = (*columns, selection.by)  # the draw needs the class column; dropped after
        self.query = Query(whole.dataset, columns, whole.filters, whole.window)
        with translate_missing(whole.dataset):
            if isinstance(selection, Sample):
                taken, self.classes = _draw_sample(whole.query, selection, whole.epoch), None
            else:
                taken, self.classes = _draw_balance(whole, selection, whole.epoch)
        # the epoch's order: the scan's (row groups permuted when shuffled), keeping picked row groups
        order = [t for t in whole.query.ordered(whole.shuffle, whole.epoch) if taken.get(_key(t), (0, 0))[1] > 0]
        self.tasks = order
        self.matching = [taken[_key(t)][0] for t in order]
        self.taken = [taken[_key(t)][1] for t in order]
        self.spans = _spans(self.taken, self.matching, reader.chunk_rows(whole.query, whole.chunk_floor()))
        self.permute = whole.permute()
        self.task_starts = list(np.concatenate([[0], np.cumsum(self.taken, dtype=np.int64)]).tolist())
        super().__init__(_starts(self.taken, self.spans))

    def pick(self, j: int, table: pa.Table) -> np.ndarray:
        """Positions (sorted) of the picked rows of task j, whose matching rows ``table`` holds."""
        task, k = self.tasks[j], self.taken[j]
        s = self.selection
        if table.num_rows != self.matching[j]:
            raise DalError(
                f"row group {task.row_group} of {task.uri} changed while reading: {table.num_rows} rows, "
                f"{self.matching[j]} counted"
            )
        if isinstance(s, Sample):
            rng = np.random.default_rng(_task_seed(task, s.seed, self.epoch, SAMPLE_TAG))
            n = table.num_rows
            picked = rng.integers(0, n, k) if s.replace else rng.choice(n, k, replace=False)
            return np.sort(picked).astype(np.int64)
        assert self.classes is not None
        rng = np.random.default_rng(_task_seed(task, s.seed, self.epoch, BALANCE_TAG))
        column = _class_column(table.column(s.by).combine_chunks())
        wanted = sorted(self.classes[j].items(), key=lambda kv: _order_key(kv[0]))
        values = [v for v, _ in wanted if v is not None]
        # each row's class as an index into ``values`` (one pass), -1 for nulls and other classes
        codes = pc.index_in(column, value_set=pa.array(values, column.type)).fill_null(-1).to_numpy()
        out = []
        for value, want in wanted:
            if value is None:
                where = np.flatnonzero(pc.is_null(column).to_numpy(zero_copy_only=False))
            else:
                where = np.flatnonzero(codes == values.index(value))
            if not s.replace and want > len(where):
                raise DalError(f"internal: class {value!r} of {task.uri} has {len(where)} rows, {want} drawn")
            out.append(rng.choice(where, want, replace=s.replace))
        return np.sort(np.concatenate(out)).astype(np.int64) if out else np.zeros(0, np.int64)

    def read_chunk(self, i: int) -> pa.Table:
        a, b = self.spans[i]
        with translate_missing(self.query.source):
            # the chunk's row groups in one pyarrow scan (decoded in parallel, in order), then one gather
            table = reader.read_span(self.query, self.tasks[a:b])
        offsets = np.concatenate([[0], np.cumsum(self.matching[a:b], dtype=np.int64)])
        if table.num_rows != offsets[-1]:
            raise DalError(
                f"{self.query.source.name}: row groups changed while reading ({table.num_rows} rows, "
                f"{int(offsets[-1])} counted)"
            )
        picks = [offsets[j - a] + self.pick(j, table.slice(offsets[j - a], self.matching[j])) for j in range(a, b)]
        table = reader.combine([table.take(pa.array(np.concatenate(picks)))], self.tasks[a], self.permute)
        return table.select(self.columns) if table.column_names != self.columns else table

    def tasks_in(self, ranges: Sequence[tuple[int, int]]) -> list[ReadTask]:
        """The picked row groups holding the virtual rows ``ranges`` (whole: they are read whole)."""
        out: dict[tuple[str, int, int], ReadTask] = {}
        for a, b in ranges:
            for i in range(self.chunks):
                if self.starts[i] < b and self.starts[i + 1] > a:
                    for j in range(*self.spans[i]):
                        out.setdefault(_key(self.tasks[j]), self.tasks[j])
        return list(out.values())


def _spans(taken: Sequence[int], matching: Sequence[int], target: int) -> list[tuple[int, int]]:
    """Chunks of picked row groups: at least ``target`` picked rows, or RAW_ROWS·target rows read (a sparse
    sample's chunk would otherwise decode most of the data at once: memory stays bounded)."""
    out, start, picked, raw = [], 0, 0, 0
    for j, (k, n) in enumerate(zip(taken, matching, strict=True)):
        picked, raw = picked + k, raw + n
        if picked >= target or raw >= RAW_ROWS * target:
            out.append((start, j + 1))
            start, picked, raw = j + 1, 0, 0
    if start < len(taken):
        out.append((start, len(taken)))
    return out


def _key(task: ReadTask) -> tuple[str, int, int]:
    return (task.uri, task.row_group, task.offset)


def _order_key(value: Any) -> tuple[int, str]:
    return (value is None, repr(value))


def _draw_sample(query: Query, s: Sample, epoch: int) -> dict[tuple[str, int, int], tuple[int, int]]:
    """Per picked row group: (matching rows, rows taken). Only picked row groups are counted."""
    tasks = query.all_tasks()
    rng = np.random.default_rng([s.seed, epoch, SAMPLE_TAG])
    if s.fraction is not None:
        p = pick_probability(s.fraction, s.spread, len(tasks))
        picked = [t for t, u in zip(tasks, rng.random(len(tasks)), strict=True) if u < p]
        matching = np.asarray(query.task_rows(picked), dtype=np.int64)
        lam = s.fraction / p
        taken = rng.poisson(matching * lam) if s.replace else rng.binomial(matching, lam)
        return {_key(t): (int(m), int(k)) for t, m, k in zip(picked, matching, taken, strict=True)}
    assert s.rows is not None
    # C = spread·n rows covered by k equal windows of L rows, spaced N//k apart from a uniformly random start on
    # the circle of the epoch's matching rows (row groups in a seeded order): the windows never overlap, so every
    # row is covered with probability exactly kL/N; then n rows are drawn among the covered ones. Each row
    # group's expected rows covered are its rows · kL/N, so every row's chance is exactly n/N whatever the row
    # group sizes (picking row groups until they hold enough rows would favour rows of small row groups).
    counts = np.asarray(query.task_rows(tasks), dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        raise DalError("sample: the scan has no rows to sample")
    if total < s.rows and not s.replace:
        raise DalError(f"sample(rows={s.rows}) without replacement, but the scan has only {total} rows")
    order = rng.permutation(len(tasks))
    ends = np.cumsum(counts[order])
    begins = ends - counts[order]
    cover = total if math.isinf(s.spread) else int(min(total, max(s.rows, math.ceil(s.rows * s.spread))))
    start = int(rng.integers(0, total))
    if cover >= total:
        windows, length, stride = 1, total, total
    else:
        windows = max(1, min(s.windows, len(tasks), cover))
        while windows > 1 and -(-cover // windows) > total // windows:  # windows of ceil(C/k) rows must not overlap
            windows -= 1
        length, stride = -(-cover // windows), total // windows
    span = windows * length
    inside = np.zeros(len(tasks), dtype=np.int64)
    for j in range(windows):
        a = (start + j * stride) % total
        b = a + length
        inside += np.clip(np.minimum(ends, b) - np.maximum(begins, a), 0, None)
        if b > total:  # the window wraps around to the first rows
            inside += np.clip(np.minimum(ends, b - total) - begins, 0, None)
    if s.replace:
        taken = rng.multinomial(s.rows, inside / span)
    else:
        taken = hypergeometric(rng, inside, s.rows, f"sample(rows={s.rows}, spread={s.spread}, windows={windows})")
    return {_key(tasks[i]): (int(m), int(k)) for i, m, k in zip(order.tolist(), counts[order], taken, strict=True) if k}


def class_counts(source: Any, by: str) -> list[dict[Any, int]]:
    """Rows per class value of ``by`` in every planned row group (``Query.all_tasks`` order), counted once
    per pinned version, filter and window by reading only ``by`` and the filter columns (cached)."""
    scan = source
    query = Query(scan.dataset, (by,), scan.filters, scan.window)
    tasks = query.all_tasks()

    def count(i: int) -> dict[Any, int]:
        column = reader.read_task(query, tasks[i]).column(by)
        counts = pc.value_counts(_class_column(column.combine_chunks())) if len(column) else pa.array([], pa.struct([]))
        out: dict[Any, int] = {}
        for item in counts.to_pylist():
            key = class_key(item["values"])
            out[key] = out.get(key, 0) + int(item["counts"])
            if len(out) > MAX_CLASSES:
                raise DalError(
                    f"balance by {by!r}: more than {MAX_CLASSES} distinct values; balance needs a class column"
                )
        return out

    def compute() -> list[dict[Any, int]]:
        with translate_missing(scan.dataset):
            return list(reader.ordered_map(count, len(tasks), reader.READ_THREADS))

    key = f"balance-counts:{by}:{query.filters!r}:{query.window!r}"
    return list(scan.dataset.plan_cache.value(key, compute))


def _draw_balance(
    scan: Any, b: Balance, epoch: int
) -> tuple[dict[tuple[str, int, int], tuple[int, int]], list[dict[Any, int]]]:
    """Per row group: (matching rows, rows taken), and the rows taken of each class."""
    per_task = class_counts(scan, b.by)
    tasks = Query(scan.dataset, (b.by,), scan.filters, scan.window).all_tasks()
    totals = _class_totals(per_task, b.by)
    classes = sorted(totals, key=_order_key)
    weights = _class_weights(b, classes, totals)
    live = [c for c in classes if weights.get(c, 0) > 0]
    shares = np.asarray([weights[c] for c in live], dtype=np.float64)
    shares /= shares.max()  # 1e308 + 1e308 is inf: the largest first
    shares /= shares.sum()
    wanted = _class_rows(b, live, shares, totals)
    rng = np.random.default_rng([b.seed, epoch, BALANCE_TAG])
    taken = np.zeros((len(tasks), len(live)), dtype=np.int64)
    for j, c in enumerate(live):
        colors = np.asarray([counts.get(c, 0) for counts in per_task], dtype=np.int64)
        if wanted[c] == 0:
            continue
        if b.replace:
            taken[:, j] = rng.multinomial(wanted[c], colors / colors.sum())
        else:
            taken[:, j] = hypergeometric(rng, colors, wanted[c], f"balance by {b.by!r}: class {c!r}")
    out: dict[tuple[str, int, int], tuple[int, int]] = {}
    picks: dict[tuple[str, int, int], dict[Any, int]] = {}
    for i, t in enumerate(tasks):
        k = int(taken[i].sum())
        if k:
            out[_key(t)] = (sum(per_task[i].values()), k)
            picks[_key(t)] = {c: int(taken[i, j]) for j, c in enumerate(live) if taken[i, j]}
    order = [t for t in scan.query.ordered(scan.shuffle, epoch) if _key(t) in out]
    return out, [picks[_key(t)] for t in order]


def _class_totals(per_task: Sequence[Mapping[Any, int]], by: str) -> dict[Any, int]:
    """Rows per class over every row group.

    Raises:
        DalError: no rows, or more than ``MAX_CLASSES`` distinct values (not a class column)."""
    totals: dict[Any, int] = {}
    for counts in per_task:
        for v, n in counts.items():
            totals[v] = totals.get(v, 0) + n
    if not totals:
        raise DalError(f"balance by {by!r}: the scan has no rows")
    if len(totals) > MAX_CLASSES:  # each row group below the limit, all of them above (an id column)
        raise DalError(
            f"balance by {by!r}: {len(totals)} distinct values (more than {MAX_CLASSES}); balance needs a class column"
        )
    return totals


def _class_weights(b: Balance, classes: Sequence[Any], totals: Mapping[Any, int]) -> dict[Any, float]:
    """Each class's weight: equal unless ``b.weights`` gives them.

    Raises:
        DalError: a weight names a value the column does not hold in this scan."""
    if b.weights is None:
        return dict.fromkeys(classes, 1.0)
    weights = dict(b.weights)
    unknown = [k for k in weights if k not in totals]
    if unknown:
        shown = ", ".join(repr(c) for c in classes[:20])
        raise DalError(
            f"balance by {b.by!r}: weights name {', '.join(map(repr, unknown))}, not a value of the column "
            f"in this scan (its values: {shown}{', …' if len(classes) > 20 else ''})"
        )
    return weights


def _class_rows(b: Balance, live: Sequence[Any], shares: np.ndarray, totals: Mapping[Any, int]) -> dict[Any, int]:
    """The rows taken of each class with a weight: ``b.rows`` (or every row with replacement, or as many as the
    scarcest class allows) apportioned by ``shares``; without replacement no more than a class has.

    Raises:
        DalError: ``b.rows`` needs more rows of a class than it has (without replacement)."""
    if b.rows is not None:
        rows = b.rows
    elif b.replace:
        rows = sum(totals.values())
    else:  # as many rows as the scarcest class allows
        rows = int(min(math.floor(totals[c] / s + 1e-9) for c, s in zip(live, shares, strict=True)))
    wanted = dict(zip(live, apportion(rows, shares.tolist()), strict=True))
    if not b.replace:
        for c in live:
            if wanted[c] > totals[c]:
                if b.rows is not None:
                    raise DalError(
                        f"balance rows={rows}: class {c!r} needs {wanted[c]} rows but has {totals[c]}; "
                        "pass replace=True or fewer rows"
                    )
                wanted[c] = totals[c]  # rounding
    return wanted


# -- ranges of virtual rows: shards, workers, resumption, units ------------------------------------------


def rank_ranges(total: int, shard: tuple[int, int, Any] | None) -> list[tuple[int, int]]:
    """The rank's virtual rows ``[(start, stop)]`` (``dal.read.sharding.share``: pad / drop / keep)."""
    if shard is None:
        return [(0, total)] if total else []
    return [(s, s + n) for s, n in share(total, *shard)]


def length(ranges: Sequence[tuple[int, int]]) -> int:
    return sum(b - a for a, b in ranges)


def sub_ranges(ranges: Sequence[tuple[int, int]], start: int, stop: int | None = None) -> list[tuple[int, int]]:
    """Rows ``[start, stop)`` of the concatenation of ``ranges``."""
    out, seen = [], 0
    for a, b in ranges:
        lo, hi = max(a, a + start - seen), b if stop is None else min(b, a + stop - seen)
        if lo < hi:
            out.append((lo, hi))
        seen += b - a
    return out


def part_ranges(ranges: Sequence[tuple[int, int]], index: int, parts: int) -> list[tuple[int, int]]:
    """Worker ``index`` of ``parts``'s disjoint share of ``ranges`` (floor or ceil of an equal share)."""
    got = share(length(ranges), index, parts, "keep")
    return sub_ranges(ranges, got[0][0], got[0][0] + got[0][1]) if got else []


def units(rows: Rows, ranges: Sequence[tuple[int, int]]) -> list[Unit]:
    """``ranges`` cut at chunk boundaries: one unit per (piece of a) chunk."""
    out: list[Unit] = []
    for a, b in ranges:
        while a < b:
            i = max(bisect.bisect_right(rows.starts, a) - 1, 0)
            hi = min(b, rows.starts[i + 1]) if i + 1 < len(rows.starts) else b
            out.append(_unit(rows, a, hi))
            a = hi
    return out


def _unit(rows: Rows, a: int, b: int) -> Unit:
    def unit() -> pa.Table:
        pieces = rows.rows(a, b)
        return pa.concat_tables(pieces).combine_chunks() if len(pieces) > 1 else pieces[0]

    return unit


def read_units(units: Sequence[Unit], convert: Callable[[pa.Table], T] | None = None) -> Iterator[Any]:
    """The units read (and converted) on reader threads, in order, a few ahead."""

    def one(i: int) -> Any:
        table = units[i]()
        return convert(table) if convert is not None else table

    if reader.on_caller():  # a DataLoader worker process (reader.read_on_caller)
        return (one(i) for i in range(len(units)))
    return reader.prefetch(reader.ordered_map(one, len(units), 3), reader.PREFETCH_CHUNKS)


def rank_units(rows: Rows, shard: tuple[int, int, Any] | None, skip: int = 0) -> tuple[list[Unit], int]:
    """The rank's units (its first ``skip`` rows dropped) and how many rows they hold."""
    ranges = sub_ranges(rank_ranges(rows.total, shard), skip)
    return units(rows, ranges), length(ranges)
