"""Progress of long operations: a tqdm bar on stderr, redrawn in place on a terminal or in a notebook cell.

``task(label, total=..., unit=...)`` opens a bar for an operation (a write, a sync of a long history, a gc, a
Hive sync); the code doing the work calls ``advance`` on it, or on ``current()`` when it is deeper down (a
format's writer counting the rows it hands to storage). dal counts and decides when to draw; tqdm draws::

    writing weather.radar:  60%|██████    | 1200000/2000000 [00:05<00:03, 250000.00 rows/s, 3 files, 48.0 MiB]

A bar is redrawn at most ``INTERVAL`` apart, cut to one column less than the terminal's width, and appears only
once the operation has run ``DAL_PROGRESS_DELAY`` seconds (0.5 by default): quick commands print nothing. On a
terminal tqdm writes carriage returns only (no colours, no cursor codes) and all tasks share one line: a nested
task (the sync inside a write) draws over its parent's bar and clears it when it ends, then the parent resumes.
The outermost task's final bar stays (totals, elapsed time, overall rate); a failed task clears its line.

Progress is drawn only when all of these hold:

- stderr is a terminal (never a pipe, a file or a CI log) and ``TERM`` is not ``dumb``, or this is a Jupyter kernel;
- ``DAL_PROGRESS`` is not ``0`` / ``false`` / ``no`` / ``off``;
- ``set_enabled(False)`` was not called (the CLI's ``--quiet`` calls it);
- the ``dal.progress`` logger, else the ``dal`` logger, is not disabled and has no level above INFO set
  (``logging.getLogger("dal").setLevel(logging.WARNING)`` silences progress too).

Otherwise every function here returns a no-op task and changes nothing (readers are passed through as they are).

**Notebooks.** In a Jupyter kernel (an IPython ``ZMQInteractiveShell``: Jupyter, JupyterLab, VS Code, Colab) a
task is tqdm's widget with ipywidgets installed, else tqdm's text bar, which a cell redraws in place (it honours
``\\r``): tqdm.auto's choice, without its warning when ipywidgets is missing. **Why tqdm, not rich.progress:**
one library for both, and rich's live display shows nothing in a notebook without ipywidgets (a warning
instead) and hides the cursor and erases lines with escape codes on a terminal.
"""

from __future__ import annotations

import functools
import logging
import math
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
DEFAULT_DELAY = 0.5  # seconds before a bar first appears
CHUNK_ROWS = 65_536  # counted() hands batches on in pieces of at most this many rows (only while drawing)
_OFF = {"0", "false", "no", "off"}
T = TypeVar("T")

_lock = threading.RLock()
_stack: list[Task] = []  # open tasks, outermost first; only the innermost draws
_on_line: list[Any] = [None]  # the tqdm bar whose text is on the terminal's current line (None: a clear line)
_override: bool | None = None


def set_enabled(value: bool | None) -> None:
    """Switch progress on or off for this process.

    Args:
        value: ``False``: no progress (as ``--quiet``); ``None``: the default (terminal, env, logger); ``True``
            lifts ``DAL_PROGRESS=0`` and the logger check, but progress is still drawn only on a terminal.

    Raises:
        DalError: ``value`` is not True, False or None.
    """
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
    """Whether a task is drawn in a notebook cell (see the module docstring)."""
    return stream is None and _wanted() and in_notebook()


def enabled(stream: IO[str] | None = None) -> bool:
    """Whether progress would be drawn now.

    Args:
        stream: Where it would be drawn; default stderr (a terminal, or a notebook's cell).
    """
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


def _width(stream: IO[str]) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        try:
            return int(os.environ.get("COLUMNS", "80"))
        except ValueError:
            return 80


def size_text(n: float) -> str:
    """Bytes for people in binary units: ``512 B``, ``1.5 KiB``, ``48.0 MiB``.

    The one size formatter of dal: the progress bar, the CLI (``dal.cli.output``), the web UI and read stats
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


def columns(text: str) -> int:
    """The terminal columns ``text`` takes (not its length: 数据 takes 4, a combining accent 0)."""
    if text.isascii():
        return len(text)
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in text
    )


@functools.cache
def _bar_class(notebook: bool) -> Any:
    """tqdm's bar for a terminal; in a notebook its widget when ipywidgets is importable, else the text bar
    (tqdm.auto's choice, silently). No tqdm monitor thread (dal throttles), and every line cut to the width
    (tqdm cuts a line with a total, not one without)."""
    from tqdm.std import tqdm as base
    from tqdm.utils import disp_trim

    if notebook:
        try:
            import ipywidgets  # noqa: F401
            from tqdm.notebook import tqdm as base
        except ImportError:
            pass

    def format_meter(*args: Any, **kwargs: Any) -> str:
        line: str = base.format_meter(*args, **kwargs)
        ncols = kwargs.get("ncols")
        return disp_trim(line, ncols) if ncols else line

    return type("DalBar", (base,), {"monitor_interval": 0, "format_meter": staticmethod(format_meter)})


class Task:
    """One operation's progress: counted here, drawn as a tqdm bar (in a notebook cell when ``notebook``).
    Thread-safe: a poller thread may ``update`` it while the caller waits."""

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
        notebook: bool = False,
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
        self.absorb = absorb
        self.notebook = notebook
        self.start = self.clock()
        self.held = False  # counting, not drawing (another progress bar owns the terminal for a while)
        self.draws = 0
        self._last_draw: float | None = None
        self._bar: Any = None  # the tqdm bar, made at the first draw

    @property
    def shown(self) -> bool:
        """Whether this task has drawn its bar."""
        return self._bar is not None

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
        """Set absolute values (a poller reading counters); ``fraction`` (0..1): done as a part of the whole
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
            self._draw()
            self._last_draw = now
            self.draws += 1

    def _postfix(self) -> str:
        spark = self.total is None and self.fraction is not None and self.fraction < 1  # (done: the count says it)
        parts = [f"{self.fraction:.0%} done"] if spark else []
        if self.files:
            parts.append(f"{self.files} file{'s' if self.files != 1 else ''}")
        if self.bytes:
            parts.append(size_text(self.bytes))
        return ", ".join(parts)

    def _draw(self) -> None:
        bar = self._bar
        if bar is None:
            bar = self._bar = _bar_class(self.notebook)(
                desc=self.label, total=self.total, unit=f" {self.unit}", file=self.stream, position=0,
                mininterval=0, miniters=1, smoothing=0, delay=0 if self.notebook else math.inf,
            )  # fmt: skip  # (delay: tqdm draws nothing until dal's first draw below)
            bar._time, bar.start_t, bar.delay = self.clock, self.start, 0  # rate and ETA from the task's start
        if _on_line[0] is not None and _on_line[0] is not bar:  # another task's text: blank it first
            _on_line[0].clear()
        _on_line[0] = bar
        if not self.notebook:
            bar.ncols = max(10, (self.width or _width(self.stream)) - 1)  # never the last column: some wrap there
        bar.total, bar.n = self.total, self.done
        bar.set_postfix_str(self._postfix(), refresh=False)
        bar.refresh()

    def close(self, ok: bool = True) -> None:
        """End the task: the outermost one's bar stays as its summary (when drawn and ``ok``); others clear."""
        with _lock:
            outermost = bool(_stack) and _stack[0] is self
            if self in _stack:
                _stack.remove(self)
            bar = self._bar
            if bar is not None:
                if ok and outermost:
                    bar.total, bar.n = self.total, self.done
                    bar.set_postfix_str(self._postfix(), refresh=False)
                bar.leave = ok and outermost
                try:
                    bar.close()
                except (OSError, ValueError):  # a closed terminal must not fail the operation
                    pass
                if _on_line[0] is bar:
                    _on_line[0] = None
            if _stack:
                _stack[-1]._last_draw = None  # redraw the outer bar at its next update


class _Null(Task):
    """The task when progress is off: counts nothing, draws nothing."""

    active = False

    def __init__(self) -> None:  # no super().__init__: nothing to keep
        self.label, self.total, self.unit = "", None, ""
        self.done = self.files = self.bytes = 0
        self.fraction = None
        self.absorb = False
        self.held = False
        self._bar = None

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


class _ClearLine(logging.Filter):
    """On a stream handler while a bar is drawn: clears the line before the handler writes a record, so a log
    message (a warning, Python's last-resort handler included) starts at column 0 instead of being glued to the
    bar; the bar is redrawn at its next update."""

    def filter(self, record: logging.LogRecord) -> bool:
        with _lock:
            if _on_line[0] is not None and _stack:
                _on_line[0].clear()
                _on_line[0] = None
                _stack[-1]._last_draw = None
        return True


_CLEAR_LINE = _ClearLine()
_hooked: list[logging.Handler] = []


def _hook_logging(stream: IO[str]) -> None:
    """While tasks are open: the handlers writing to the terminal the bar is on clear the line first."""
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
    """A progress bar for the block (a no-op task when progress is off); see the module docstring.

    ``absorb=True``: the next task opened inside this block adds to this one instead of drawing its own bar
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
        elif enabled():
            t = Task(label, total=total, unit=unit, absorb=absorb, notebook=_notebook_bars())
            if not _stack and not t.notebook:
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
