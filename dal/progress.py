"""Progress of long operations on a terminal: one line on stderr, redrawn in place.

``task(label, total=..., unit=...)`` opens a progress line for an operation (a write, a sync of a long
history, a gc, a Hive sync); the code doing the work calls ``advance`` on it, or on ``current()`` when it
is deeper down (a format's writer counting the rows it hands to storage). The line shows the count (of
``total`` with a percentage when known), files and bytes when counted, the rate and, when the total is
known, an ETA::

    writing weather.radar: 1,200,000/2,000,000 rows  60% · 3 files · 48.0 MB · 250k rows/s · ETA 0:03

It is redrawn at most ``INTERVAL`` times a second with a carriage return (no colours, no cursor codes),
cut to the terminal's width, and appears only once the operation has run ``DAL_PROGRESS_DELAY`` seconds
(0.5 by default) so quick commands print nothing. When the outermost task ends its line is replaced by a
one-line summary (``gc ds: 40 files, 12.0 MB in 2.1 s``); a nested task (the sync inside a write) clears
its line and the outer one resumes; a failed task clears its line.

Progress is drawn only when all of these hold:

- stderr is a terminal (never into a pipe, a file or a CI log) and ``TERM`` is not ``dumb``;
- ``DAL_PROGRESS`` is not ``0`` / ``false`` / ``no`` / ``off``;
- ``set_enabled(False)`` was not called (the CLI's ``--quiet`` calls it);
- the ``dal.progress`` logger, else the ``dal`` logger, is not disabled and has no level above INFO set
  (``logging.getLogger("dal").setLevel(logging.WARNING)`` silences progress too).

Otherwise every function here returns a no-op task and changes nothing (readers are passed through as they are).

**Notebooks.** In a Jupyter kernel (Jupyter, JupyterLab, VS Code, Colab: an IPython ``ZMQInteractiveShell``)
stderr is not a terminal, yet a cell's output shows progress well: there each task is a tqdm bar instead (the
same rules otherwise: ``DAL_PROGRESS``, ``set_enabled``, the logger, the delay). With ipywidgets installed it is
tqdm's notebook widget; without, tqdm's text bar, which the notebook redraws in place (it honours ``\r`` in a
cell's stream output). That is tqdm.auto's choice, made here without its warning when ipywidgets is missing.
tqdm, not rich: rich's live display needs ipywidgets in a notebook and shows nothing in place without it, and
tqdm bars are what HF datasets and Ray show in the same cells.

Why one module: the terminal line, the notebook bars and the injectable clock share one task model; most of
the length is rate/ETA formatting that both front-ends use.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sized
from contextlib import contextmanager
from typing import IO, Any, TypeVar

from dal.errors import DalError, printable

ENV = "DAL_PROGRESS"
ENV_DELAY = "DAL_PROGRESS_DELAY"
INTERVAL = 0.1  # seconds between redraws (10 Hz at most)
DEFAULT_DELAY = 0.5  # seconds before a line first appears
MIN_ELAPSED = 0.01  # seconds before a rate (and an ETA) is shown
CHUNK_ROWS = 65_536  # counted() hands batches on in pieces of at most this many rows (only while drawing)
_OFF = {"0", "false", "no", "off"}
T = TypeVar("T")

_lock = threading.RLock()
_stack: list[Task] = []  # open tasks, outermost first; only the innermost draws
_screen = [0]  # length of the text on the terminal's current line (drawn by any task)
_override: bool | None = None


def set_enabled(value: bool | None) -> None:
    """``False``: no progress in this process (as ``--quiet``); ``None``: the default (terminal, env, logger).
    ``True`` lifts ``DAL_PROGRESS=0`` and the logger check, but progress is still drawn only on a terminal."""
    global _override
    if value is not None and not isinstance(value, bool):
        raise DalError(f"set_enabled takes True, False or None, not {value!r}")
    _override = value


def get_enabled() -> bool | None:
    """What ``set_enabled`` set (None: the default)."""
    return _override


@contextmanager
def disabled() -> Iterator[None]:
    """No progress inside the block (restores the previous setting after it)."""
    global _override
    before = _override
    _override = False
    try:
        yield
    finally:
        _override = before


def _logger_allows() -> bool:
    for name in ("dal.progress", "dal"):
        logger = logging.getLogger(name)
        if logger.disabled:
            return False
        if logger.level != logging.NOTSET:
            return logger.level <= logging.INFO
    return True


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (an IPython ``ZMQInteractiveShell`` or a subclass: Jupyter,
    JupyterLab, VS Code, Colab) — not a terminal IPython, which has a terminal."""
    ipython = sys.modules.get("IPython")
    if ipython is None or "ipykernel" not in sys.modules:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:
        return False
    return shell is not None and any(c.__name__ == "ZMQInteractiveShell" for c in type(shell).__mro__)


def _wanted() -> bool:
    if _override is False:
        return False
    return _override is True or (os.environ.get(ENV, "").strip().lower() not in _OFF and _logger_allows())


def _notebook_bars(stream: IO[str] | None = None) -> bool:
    """Whether a task is drawn as a tqdm bar in a notebook cell (see the module docstring)."""
    return stream is None and _wanted() and in_notebook()


def enabled(stream: IO[str] | None = None) -> bool:
    """Whether progress would be drawn on ``stream`` (default stderr: a terminal, or a notebook's cell) now."""
    if not _wanted():
        return False
    if _notebook_bars(stream):
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    stream = _stderr() if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or closed
        return False


def _stderr() -> IO[str]:
    return sys.stderr


def _now() -> float:
    return time.monotonic()


def _delay() -> float:
    try:
        return max(0.0, float(os.environ.get(ENV_DELAY, DEFAULT_DELAY)))
    except ValueError:
        return DEFAULT_DELAY


# -- formatting ---------------------------------------------------------------------------------------------


def count_text(n: float) -> str:
    """A rate or count in 3 significant figures: 950, 12.3k, 4.50M."""
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= limit:
            v = n / limit
            return f"{v:.3g}{suffix}" if v < 1000 else f"{v:.0f}{suffix}"
    return f"{n:.3g}" if n != int(n) else str(int(n))


def size_text(n: float) -> str:
    """Bytes for people in binary units: ``512 B``, ``1.5 KiB``, ``48.0 MiB``.

    The one size formatter of dal: the progress line, the CLI (``dal.cli.output``), the web UI and read stats
    all print sizes with it.

    Args:
        n: A byte count (or a rate in bytes per second).
    """
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def duration_text(seconds: float) -> str:
    """0:05, 12:34, 1:02:03."""
    s = max(0, round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _char_cols(c: str) -> int:
    """Terminal columns one character takes: 2 for East Asian wide/fullwidth, 0 for combining marks."""
    if unicodedata.combining(c):
        return 0
    return 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1


def columns(text: str) -> int:
    """The terminal columns ``text`` takes (not its length: 数据 takes 4, a combining accent 0)."""
    return len(text) if text.isascii() else sum(_char_cols(c) for c in text)


def _width(stream: IO[str]) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        try:
            return int(os.environ.get("COLUMNS", "80"))
        except ValueError:
            return 80


# -- tasks --------------------------------------------------------------------------------------------------


class Task:
    """One operation's progress line. Thread-safe: a poller thread may ``update`` it while the caller waits."""

    active = True

    def __init__(
        self,
        label: str,
        *,
        total: int | None = None,
        unit: str = "rows",
        stream: IO[str] | None = None,
        clock: Callable[[], float] | None = None,
        interval: float = INTERVAL,
        delay: float | None = None,
        width: int | None = None,
        absorb: bool = False,
    ) -> None:
        self.label = printable(label)  # names and locations from users: no terminal control codes
        self.total = total
        self.unit = unit
        self.done = 0
        self.files = 0
        self.bytes = 0
        self.fraction: float | None = None  # set by update(fraction=): progress not measured in ``unit``
        self.stream = _stderr() if stream is None else stream
        self.clock = clock or _now
        self.interval = interval
        self.delay = _delay() if delay is None else delay
        self.width = width
        self.absorb = absorb  # the next task opened inside this one is this one (a caller naming a callee's work)
        self.start = self.clock()
        self.shown = False  # whether a line of this task is on the terminal
        self.held = False  # counting, not drawing (another progress bar owns the terminal for a while)
        self.draws = 0
        self._last_draw: float | None = None
        utf = (getattr(self.stream, "encoding", None) or "utf-8").lower().replace("-", "").startswith("utf")
        self._dot, self._more = (" · ", "…") if utf else (" - ", "~")  # a C-locale terminal gets ASCII

    # -- counting --

    def advance(self, n: int = 1, *, files: int = 0, bytes: int = 0) -> None:
        """``n`` more units done (and ``files`` files, ``bytes`` bytes)."""
        with _lock:
            self.done += n
            self.files += files
            self.bytes += bytes
        self.refresh()

    def update(
        self,
        *,
        done: int | None = None,
        total: int | None = None,
        files: int | None = None,
        bytes: int | None = None,
        fraction: float | None = None,
    ) -> None:
        """Set absolute values (a poller reading counters); ``fraction`` (0..1) gives the percentage and ETA
        when the work is not measured in ``unit``."""
        with _lock:
            if done is not None:
                self.done = done
            if total is not None:
                self.total = total
            if files is not None:
                self.files = files
            if bytes is not None:
                self.bytes = bytes
            if fraction is not None:
                self.fraction = min(1.0, max(0.0, fraction))
        self.refresh()

    def set_total(self, total: int | None) -> None:
        with _lock:
            self.total = total
        self.refresh()

    # -- rendering --

    def progress(self) -> float | None:
        """Done as a fraction of the whole, when known."""
        if self.total:
            return min(1.0, self.done / self.total)
        if self.total == 0:
            return 1.0
        return self.fraction

    def line(self, now: float | None = None) -> str:
        """The progress text (not cut to a width)."""
        now = self.clock() if now is None else now
        elapsed = max(now - self.start, 1e-9)
        parts = []
        head = f"{self.done:,}" if self.total is None else f"{self.done:,}/{self.total:,}"
        frac = self.progress()
        head += f" {self.unit}"
        if frac is not None:
            head += f" {frac * 100:3.0f}%"
        parts.append(head)
        if self.files:
            parts.append(f"{self.files:,} file{'s' if self.files != 1 else ''}")
        if self.bytes:
            parts.append(size_text(self.bytes))
        timed = elapsed >= MIN_ELAPSED  # a rate over a few milliseconds says nothing
        if self.done and timed:
            parts.append(f"{count_text(self.done / elapsed)} {self.unit}/s")
        elif self.bytes and timed:
            parts.append(f"{size_text(self.bytes / elapsed)}/s")
        if frac is not None and 0 < frac < 1 and timed:
            parts.append(f"ETA {duration_text(elapsed * (1 - frac) / frac)}")
        return f"{self.label}: " + self._dot.join(parts)

    def summary(self, now: float | None = None) -> str:
        now = self.clock() if now is None else now
        elapsed = max(now - self.start, 0.0)
        parts = [f"{self.done:,} {self.unit}"]
        if self.files:
            parts.append(f"{self.files:,} file{'s' if self.files != 1 else ''}")
        if self.bytes:
            parts.append(size_text(self.bytes))
        rate = f" ({count_text(self.done / elapsed)} {self.unit}/s)" if self.done and elapsed >= MIN_ELAPSED else ""
        return f"{self.label}: " + ", ".join(parts) + f" in {elapsed:.1f} s{rate}"

    def _fit(self, text: str) -> str:
        width = self.width or _width(self.stream)
        limit = max(10, width - 1)  # never the last column: some terminals wrap there
        if columns(text) <= limit:
            return text
        used, end = 0, 0
        while end < len(text):  # cut by columns, not characters: a wide name must not wrap the line
            used += _char_cols(text[end])
            if used > limit - 1:
                break
            end += 1
        return text[:end] + self._more

    def refresh(self, *, force: bool = False) -> None:
        """Redraw if this is the innermost task, its delay has passed and the last draw is ``interval`` ago."""
        with _lock:
            if not _stack or _stack[-1] is not self or self.held:
                return
            now = self.clock()
            if not force:
                if now - self.start < self.delay:
                    return
                if self._last_draw is not None and now - self._last_draw < self.interval:
                    return
            self._draw(self._fit(self.line(now)))
            self._last_draw = now
            self.shown = True
            self.draws += 1

    def _draw(self, text: str, end: str = "") -> None:
        """``text`` over the current line (blanks over what is left of a longer one), then ``end``."""
        cols = columns(text)
        pad = " " * max(0, _screen[0] - cols)
        self._write("\r" + text + pad + end)
        _screen[0] = 0 if end else cols

    def _clear(self) -> None:
        if _screen[0]:
            self._write("\r" + " " * _screen[0] + "\r")
        _screen[0] = 0

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed terminal must not fail the operation
            pass

    def close(self, ok: bool = True) -> None:
        """End the task: the outermost one's line becomes a summary (when it was shown and ``ok``); others clear."""
        with _lock:
            outermost = bool(_stack) and _stack[0] is self
            if self in _stack:
                _stack.remove(self)
            if self.shown:
                if ok and outermost:
                    self._draw(self._fit(self.summary()), "\n")
                else:
                    self._clear()
            if _stack:
                _stack[-1]._last_draw = None  # redraw the outer line at its next update


class _Null(Task):
    """The task when progress is off: counts nothing, draws nothing."""

    active = False

    def __init__(self) -> None:  # no super().__init__: nothing to keep
        self.label, self.total, self.unit = "", None, ""
        self.done = self.files = self.bytes = 0
        self.fraction = None
        self.absorb = False
        self.shown = self.held = False

    def advance(self, n: int = 1, *, files: int = 0, bytes: int = 0) -> None:
        pass

    def update(self, **_: Any) -> None:
        pass

    def set_total(self, total: int | None) -> None:
        pass

    def refresh(self, *, force: bool = False) -> None:
        pass

    def close(self, ok: bool = True) -> None:
        pass


NULL = _Null()


class _NotebookTask(Task):
    """A task drawn as a tqdm bar in a notebook cell (see the module docstring); counting, throttling and the
    delay are Task's. The outermost bar stays as the summary; nested and failed ones are removed."""

    def __init__(self, label: str, *, total: int | None, unit: str, absorb: bool, leave: bool) -> None:
        super().__init__(label, total=total, unit=unit, absorb=absorb)
        self.leave = leave
        self._bar: Any = None

    def _postfix(self) -> str:
        parts = []
        if self.files:
            parts.append(f"{self.files:,} file{'s' if self.files != 1 else ''}")
        if self.bytes:
            parts.append(size_text(self.bytes))
        return ", ".join(parts)

    def _sync(self) -> None:
        bar = self._bar
        if bar is None:
            bar = self._bar = _bar_class()(
                desc=self.label, total=self.total, unit=f" {self.unit}", leave=self.leave, file=self.stream,
                mininterval=0, miniters=1,
            )  # fmt: skip
        if self.total is not None and bar.total != self.total:
            bar.total = self.total
        if self.total is None and self.fraction is not None:  # progress not in units: a bar of 1,000 steps
            bar.total, bar.n = 1000, round(self.fraction * 1000)
        else:
            bar.n = self.done
        bar.set_postfix_str(self._postfix(), refresh=False)
        bar.refresh()

    def _draw(self, text: str, end: str = "") -> None:
        self._sync()

    def _clear(self) -> None:
        pass

    def close(self, ok: bool = True) -> None:
        with _lock:
            if self in _stack:
                _stack.remove(self)
            if self._bar is not None:
                if ok and self.leave:
                    self._sync()
                else:
                    self._bar.leave = False
                self._bar.close()
            if _stack:
                _stack[-1]._last_draw = None


def _bar_class() -> Any:
    """tqdm's notebook widget when ipywidgets is importable, else its text bar (tqdm.auto's choice, silently)."""
    try:
        import ipywidgets  # noqa: F401
        from tqdm.notebook import tqdm
    except ImportError:
        from tqdm.std import tqdm
    return tqdm


class _ClearLine(logging.Filter):
    """On a stream handler while a line is drawn: clears the line before the handler writes a record, so a
    log message (a warning, Python's last-resort handler included) starts at column 0 instead of being glued
    to the progress text; the line is redrawn at its next update."""

    def filter(self, record: logging.LogRecord) -> bool:
        with _lock:
            if _screen[0] and _stack:
                _stack[-1]._clear()
                _stack[-1]._last_draw = None
        return True


_CLEAR_LINE = _ClearLine()
_hooked: list[logging.Handler] = []


def _hook_logging(stream: IO[str]) -> None:
    """While tasks are open: the handlers writing to the terminal the line is on clear the line first."""
    candidates = [logging.lastResort, *logging.getLogger().handlers, *logging.getLogger("dal").handlers]
    for h in candidates:
        if isinstance(h, logging.StreamHandler) and h.stream is stream and h not in _hooked:
            h.addFilter(_CLEAR_LINE)
            _hooked.append(h)


def _unhook_logging() -> None:
    for h in _hooked:
        h.removeFilter(_CLEAR_LINE)
    _hooked.clear()


def current() -> Task:
    """The innermost open task (a no-op task when none is open or progress is off)."""
    with _lock:
        return _stack[-1] if _stack else NULL


@contextmanager
def task(label: str, *, total: int | None = None, unit: str = "rows", absorb: bool = False) -> Iterator[Task]:
    """A progress line for the block (a no-op task when progress is off); see the module docstring.

    ``absorb=True``: the next task opened inside this block adds to this one instead of drawing its own line
    (``dal.convert`` names the write it makes).
    """
    with _lock:
        parent = _stack[-1] if _stack else None
        t: Task | None = None
        if parent is not None and parent.absorb:  # this block's work is the parent's: count it there
            parent.absorb = False
            if total is not None and parent.total is None:
                parent.total = total
            absorbed: Task = parent
        elif _notebook_bars():
            t = _NotebookTask(label, total=total, unit=unit, absorb=absorb, leave=not _stack)
            _stack.append(t)
        elif enabled():
            t = Task(label, total=total, unit=unit, absorb=absorb)
            if not _stack:
                _hook_logging(t.stream)
            _stack.append(t)
        else:
            absorbed = NULL
    if t is None:
        yield absorbed
        return
    ok = False
    try:
        yield t
        ok = True
    finally:
        t.close(ok)
        with _lock:
            if not _stack:
                _unhook_logging()


def each(
    items: Iterable[T],
    label: str,
    *,
    unit: str = "items",
    total: int | None = None,
    bytes_of: Callable[[T], int | None] | None = None,
) -> Iterator[T]:
    """``items``, one by one, inside ``task(label)`` advanced after each (with ``bytes_of(item)`` bytes): a
    one-line change to a loop. The total is ``len(items)`` when it has one."""
    if total is None and isinstance(items, Sized):
        total = len(items)
    with task(label, total=total, unit=unit) as t:
        if not t.active:
            yield from items
            return
        for item in items:
            yield item
            t.advance(1, bytes=(bytes_of(item) or 0) if bytes_of is not None else 0)


def counted(reader: Any, chunk_rows: int = CHUNK_ROWS) -> Any:
    """``reader`` (a pyarrow RecordBatchReader) advancing the current task by the rows and bytes of each batch
    as the consumer takes it; large batches are handed on in slices of ``chunk_rows`` so the count moves.
    Without an active task the reader itself is returned, untouched."""
    t = current()
    if not t.active:
        return reader
    import pyarrow as pa

    def batches() -> Iterator[Any]:
        for b in reader:
            if b.num_rows <= chunk_rows:
                t.advance(b.num_rows, bytes=b.nbytes)
                yield b
                continue
            for offset in range(0, b.num_rows, chunk_rows):
                piece = b.slice(offset, chunk_rows)
                t.advance(piece.num_rows, bytes=piece.nbytes)
                yield piece

    return pa.RecordBatchReader.from_batches(reader.schema, batches())


def rows_of(data: Any) -> int | None:
    """The number of rows of local write input when it is known without reading it (None otherwise)."""
    n = getattr(data, "num_rows", None)
    if isinstance(n, int):
        return n
    module = type(data).__module__
    if module.partition(".")[0] == "pandas" and type(data).__name__ == "DataFrame":  # pandas 3: "pandas"
        return int(data.shape[0])
    if isinstance(data, list):
        return len(data)
    return None


__all__ = [
    "ENV",
    "ENV_DELAY",
    "Task",
    "counted",
    "current",
    "disabled",
    "each",
    "enabled",
    "in_notebook",
    "rows_of",
    "set_enabled",
    "task",
]
