"""Progress lines (issue 16): drawn on a terminal for long operations — through the real ``dal`` console script
and a real Python process in a pseudo-terminal — and absent when stderr is not a terminal, with ``--quiet`` /
``-q`` or ``DAL_PROGRESS=0``; the throttling, ETA, width and final lines with a fake clock. tqdm draws the bars:
these tests assert what a bar says (counts, percentage, rate, files, bytes), not its exact layout."""

from __future__ import annotations

import fcntl
import io
import json
import logging
import os
import re
import select
import shutil
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from click.testing import CliRunner
from deltalake import DeltaTable, write_deltalake

import dal
from dal import progress
from dal.cli.app import cli

COLUMNS = 150
VERSIONS = 25


def readable(fds: list[int], timeout: float) -> list[int]:
    """The descriptors of ``fds`` with data (or closed), waiting up to ``timeout`` s: poll, not select, whose
    descriptors must be below 1024 (a long test session may hold more)."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    return [fd for fd, _events in poller.poll(timeout * 1000)]


# -- running a process in a pseudo-terminal ---------------------------------------------------------------


def dal_exe() -> str:
    exe = shutil.which("dal", path=os.path.dirname(sys.executable))
    assert exe, "the dal console script is not installed in this environment"
    return exe


def run_in_pty(
    argv: list[str], env: dict[str, str], *, stdout_pipe: bool = False, timeout: float = 90
) -> tuple[int, str, str]:
    """Run ``argv`` with stderr (and stdout unless ``stdout_pipe``) on a fresh pseudo-terminal COLUMNS wide.
    Returns (exit code, what the terminal received, what stdout's pipe received)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, COLUMNS, 0, 0))
    proc = subprocess.Popen(
        argv,
        stdin=slave,
        stdout=subprocess.PIPE if stdout_pipe else slave,
        stderr=slave,
        env={**env, "TERM": "xterm", "COLUMNS": str(COLUMNS)},
        close_fds=True,
    )
    os.close(slave)
    chunks: list[bytes] = []
    out_chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    streams = [master] + ([proc.stdout.fileno()] if stdout_pipe and proc.stdout else [])
    try:
        while streams:
            if time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"{argv} did not finish in {timeout} s: {b''.join(chunks)!r}")
            ready = readable(streams, 0.2)
            for fd in ready:
                try:
                    data = os.read(fd, 65536)
                except OSError:  # EIO: the terminal's last writer closed it
                    data = b""
                if not data:
                    streams.remove(fd)
                elif fd == master:
                    chunks.append(data)
                else:
                    out_chunks.append(data)
        code = proc.wait(timeout=30)
    finally:
        os.close(master)
        if proc.stdout:
            proc.stdout.close()
    return code, b"".join(chunks).decode(errors="replace"), b"".join(out_chunks).decode()


@pytest.fixture(params=["sqlite", "served"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """A fresh catalog (SQLite, and through ``dal serve``) and warehouse; progress lines appear at once (no delay)
    so short test runs draw them."""
    url = str(request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "served_url"))
    out = {
        k: v for k, v in os.environ.items() if k not in {"DAL_PROGRESS", "DAL_PROGRESS_DELAY", "PYTEST_CURRENT_TEST"}
    }
    out.update(
        DAL_CATALOG_URL=url,
        DAL_WAREHOUSE=str(tmp_path / "warehouse"),
        DAL_PROGRESS_DELAY="0",
    )
    return out


@pytest.fixture(scope="module")
def _history_source(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("progress") / "history")
    for i in range(VERSIONS):
        write_deltalake(path, pa.table({"id": [i], "v": [float(i)]}), mode="append")
    assert DeltaTable(path).version() == VERSIONS - 1
    return path


@pytest.fixture
def history(_history_source: str, tmp_path: Path) -> str:
    """A Delta table (written by delta-rs, not dal) with VERSIONS versions, a copy per test: registering it
    claims its location for the test's catalog."""
    path = str(tmp_path / "history")
    shutil.copytree(_history_source, path)
    return path


def progress_lines(screen: str) -> list[str]:
    """Every line drawn in place (the text between carriage returns and newlines), stripped."""
    return [p.strip() for p in screen.replace("\r\n", "\n").replace("\n", "\r").split("\r") if p.strip()]


@pytest.mark.slow
def test_register_shows_progress_on_a_terminal(env: dict[str, str], history: str) -> None:
    """stderr a terminal, stdout piped (a --json consumer): the progress is on the terminal, the JSON is clean."""
    code, screen, out = run_in_pty([dal_exe(), "register", "hist.t", history, "--json"], env, stdout_pipe=True)
    assert code == 0, screen
    assert [v["storage_version"] for v in json.loads(out)] == list(range(VERSIONS))
    lines = progress_lines(screen)
    reading = [ln for ln in lines if ln.startswith("reading the Delta log of ")]
    recording = [ln for ln in lines if ln.startswith("recording versions of hist.t: ")]
    assert reading and recording, screen
    # drawn after each version (10 times a second at most): a percentage and a count of the total (the rate and
    # ETA depend on this machine's speed: the fake-clock tests below check them, never a real process's speed)
    assert all(re.search(rf"%\|.*\| \d+/{VERSIONS} \[", ln) for ln in reading + recording), screen
    # the outermost task's final line stays on the terminal: all of it done, with its rate
    assert re.search(rf"recording versions of hist\.t: 100%\|.*\| {VERSIONS}/{VERSIONS} \[.* versions/s\]\r?\n", screen)
    assert all(len(ln) < COLUMNS for ln in lines)  # never wider than the terminal (nor its last column)
    assert "\x1b" not in screen  # no colour or cursor codes, only carriage returns


@pytest.mark.slow
def test_quiet_terminal_has_no_progress(env: dict[str, str], history: str) -> None:
    code, screen, _ = run_in_pty([dal_exe(), "--quiet", "register", "hist.t", history], env)
    assert code == 0, screen
    assert "recording versions" not in screen and "reading the Delta log" not in screen, screen
    assert "\r" not in screen.replace("\r\n", "\n")
    assert f"registered hist.t with {VERSIONS} version(s)" in screen


@pytest.mark.slow
def test_an_error_during_progress_is_one_clean_line(env: dict[str, str], history: str, tmp_path: Path) -> None:
    """A failure while a line is drawn, with RUST_BACKTRACE=1: the line is cleared and the terminal shows one
    ``dal: error:`` line from its first column, no backtrace, no ANSI codes."""
    broken = tmp_path / "broken"
    shutil.copytree(history, broken)
    DeltaTable(str(broken)).create_checkpoint()  # the latest version loads from it; older ones replay the log
    (broken / "_delta_log" / f"{VERSIONS // 2:020d}.json").write_text("{not json\n")
    code, screen, _ = run_in_pty([dal_exe(), "register", "b.t", str(broken)], {**env, "RUST_BACKTRACE": "1"})
    assert code == 1, screen
    assert "\x1b" not in screen and "backtrace" not in screen.lower() and "Traceback" not in screen
    lines = [ln for ln in screen.replace("\r\n", "\n").split("\n") if ln.strip()]
    assert len(lines) == 1, screen  # the progress line was cleared in place: no summary, nothing left over
    drawn, _, error = lines[0].rpartition("\r")
    assert drawn.startswith("\rreading the Delta log of ") or drawn.startswith("reading the Delta log of "), screen
    assert error.startswith("dal: error: ") and f"Delta version {VERSIONS // 2} cannot be loaded" in error, screen
    assert drawn.split("\r")[-1].strip() == ""  # the last thing drawn before the error: blanks over the line


@pytest.mark.slow
def test_no_progress_when_stderr_is_not_a_terminal(env: dict[str, str], history: str) -> None:
    proc = subprocess.run(
        [dal_exe(), "register", "hist.t", history], env=env, capture_output=True, text=True, timeout=90
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout == f"registered hist.t with {VERSIONS} version(s)\n"


WRITE = """
import sys
import numpy as np, pandas as pd
import dal
n = int(sys.argv[1])
df = pd.DataFrame({"id": np.arange(n), "x": np.random.default_rng(0).random(n)})
dal.write(df, "w.t")
dal.write(df.head(10), "w.t", mode="overwrite")
"""


@pytest.mark.slow
def test_pandas_write_and_gc_show_progress_on_a_terminal(env: dict[str, str]) -> None:
    rows = 300_000  # 5 slices of 65,536 rows handed to delta-rs: the line moves during the write
    code, screen, _ = run_in_pty([sys.executable, "-c", WRITE, str(rows)], env)
    assert code == 0, screen
    writing = [ln for ln in progress_lines(screen) if ln.startswith("writing w.t: ")]
    # the line moves during the write: a percentage and a count of the total below it, then the final line
    assert any(re.search(rf"%\|.*\| \d+/{rows} \[", ln) and f"{rows}/{rows}" not in ln for ln in writing), screen
    assert re.search(rf"writing w\.t: 100%\|.*\| {rows}/{rows} \[[^\]]* rows/s, [\d.]+ MiB\]\r?\n", screen)
    table = Path(env["DAL_WAREHOUSE"]) / "w.t"
    assert DeltaTable(str(table), version=0).to_pyarrow_table().num_rows == rows  # all of them, read independently

    code, screen, _ = run_in_pty([dal_exe(), "gc", "w.t", "--keep-last", "1", "--safe-age", "0s"], env)
    assert code == 0, screen
    deleting = [ln for ln in progress_lines(screen) if ln.startswith("gc w.t: deleting: ")]
    assert deleting and all(re.search(r"\d+/\d+ \[.* files/s", ln) for ln in deleting), screen
    assert "w.t: expired version(s) 0" in screen


@pytest.mark.parametrize(
    ("before", "after", "extra_env"),
    [([], ["-q"], {}), (["-q"], [], {}), ([], [], {progress.ENV: "0"}), ([], [], {"TERM": "dumb"})],
    ids=["command -q", "dal -q", "DAL_PROGRESS=0", "TERM=dumb"],
)
def test_switches_of_the_command_line(
    tty: tuple[FakeTTY, Clock],
    monkeypatch: pytest.MonkeyPatch,
    sqlite_url: str,
    history: str,
    before: list[str],
    after: list[str],
    extra_env: dict[str, str],
) -> None:
    """The same switches in-process (stderr a fake terminal): nothing drawn, and the setting restored after."""
    stream, _ = tty
    control = CliRunner().invoke(
        cli, ["--catalog", sqlite_url.replace("catalog.db", "c.db"), "register", "c.t", history, "--read-only"]
    )  # (read-only: the table's location is then claimed by the catalog under test, below)
    assert control.exit_code == 0, control.output
    assert "recording versions of c.t: 100%" in stream.getvalue()  # drawn without a switch ...
    assert stream.getvalue().endswith(f"| {VERSIONS}/{VERSIONS} [00:00<?, ? versions/s]\n")  # ... to the end
    stream.truncate(0)
    stream.seek(0)
    for k, v in extra_env.items():
        monkeypatch.setenv(k, v)
    result = CliRunner().invoke(cli, ["--catalog", sqlite_url, *before, "register", "hist.t", history, *after])
    assert result.exit_code == 0, result.output
    assert result.output == f"registered hist.t with {VERSIONS} version(s)\n"
    assert stream.getvalue() == ""
    assert progress.get_enabled() is None  # --quiet lasts one command (in-process callers get theirs back)


def test_api_writes_print_nothing_without_a_terminal(sqlite_env: object, capfd: pytest.CaptureFixture[str]) -> None:
    dal.write(pd.DataFrame({"a": range(100_000)}), "quiet.t")
    dal.sync("quiet.t")
    assert capfd.readouterr() == ("", "")


# -- the renderer ----------------------------------------------------------------------------------------


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def tty(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeTTY, Clock]]:
    """stderr a (fake) terminal 80 columns wide, a clock the test moves, no delay; the default switches."""
    stream, clock = FakeTTY(), Clock()
    monkeypatch.setattr(progress, "_stderr", lambda: stream)  # not sys.stderr: pytest's capture resets that
    monkeypatch.setattr(progress, "_now", clock)
    monkeypatch.setattr(progress, "_width", lambda _s: 80)
    monkeypatch.setenv(progress.ENV_DELAY, "0")
    monkeypatch.delenv(progress.ENV, raising=False)
    monkeypatch.setenv("TERM", "xterm")
    before = progress.get_enabled()
    progress.set_enabled(None)
    yield stream, clock
    progress.set_enabled(before)
    assert progress._stack == []


def frames(stream: FakeTTY) -> list[str]:
    return [p for p in stream.getvalue().replace("\n", "\r").split("\r") if p.strip()]


def last_line(stream: FakeTTY) -> str:
    """The last line the terminal shows (see ``screen_of``) after a newline ends it."""
    assert stream.getvalue().endswith("\n")
    return screen_of(stream.getvalue())[-2]


def test_redraws_at_most_ten_times_a_second(tty: tuple[FakeTTY, Clock]) -> None:
    stream, clock = tty
    with progress.task("copying", total=1000, unit="rows") as t:
        for _ in range(100):  # 100 updates at one instant: one draw
            t.advance(1)
        assert t.draws == 1
        clock.t += 0.05
        t.advance(1)
        assert t.draws == 1  # 50 ms later: not yet
        clock.t += 0.06
        t.advance(1)
        assert t.draws == 2
        for _ in range(30):  # 3 s of updates every 10 ms: 30 draws, not 300
            for _ in range(10):
                clock.t += 0.01
                t.advance(1)
        assert 25 <= t.draws - 2 <= 31  # (the clock's float steps make some gaps 11 updates long)
    assert stream.getvalue().endswith("\n")


def test_delay_hides_quick_operations(tty: tuple[FakeTTY, Clock], monkeypatch: pytest.MonkeyPatch) -> None:
    stream, clock = tty
    monkeypatch.setenv(progress.ENV_DELAY, "0.5")
    with progress.task("quick", total=10) as t:
        t.advance(5)
        clock.t += 0.2
        t.advance(5)
    assert stream.getvalue() == ""  # never drawn: no summary either
    with progress.task("slow", total=10) as t:
        t.advance(1)
        clock.t += 0.6
        t.advance(1)
        assert t.draws == 1
    assert last_line(stream).startswith("slow:  20%|")  # 2 of 10 after 0.6 s: 2.4 s to go at 3.33 rows/s
    assert last_line(stream).endswith("| 2/10 [00:00<00:02,  3.33 rows/s]")


def test_percentage_rate_and_eta(tty: tuple[FakeTTY, Clock]) -> None:
    stream, clock = tty
    with progress.task("writing d", total=100, unit="rows") as t:
        clock.t += 10
        t.update(done=25, files=2, bytes=3 * 1024 * 1024)
        line = frames(stream)[-1]
    assert line.startswith("writing d:  25%|")  # elapsed 10 s, 30 s to go
    assert line.endswith("| 25/100 [00:10<00:30,  2.50 rows/s, 2 files, 3.0 MiB]")
    with progress.task("x", unit="versions") as t2:
        clock.t += 2
        t2.update(done=7, fraction=0.5)  # a fraction from elsewhere (Spark's tasks): said beside the count
        assert frames(stream)[-1] == "x: 7 versions [00:02,  3.50 versions/s, 50% done]"
        t2.update(fraction=1.0)  # all of it: the count says so
        t2.refresh(force=True)
        assert frames(stream)[-1].rstrip() == "x: 7 versions [00:02,  3.50 versions/s]"  # (blanks over the longer one)
    with progress.task("y", unit="rows") as t3:
        t3.refresh(force=True)
        assert frames(stream)[-1] == "y: 0 rows [00:00, ? rows/s]"  # nothing known yet: no rate


def test_cut_to_the_terminal_width(tty: tuple[FakeTTY, Clock]) -> None:
    stream, clock = tty
    label = "writing " + "a.very_long_dataset_name" * 5
    with progress.task(label, total=10**9) as t:
        clock.t += 1
        t.advance(123_456_789, files=3, bytes=10**9)
    drawn = frames(stream)
    assert drawn and all(len(f) <= 79 for f in drawn)  # never the last column
    assert drawn[0] == label[:79]  # the start of the label: the counts did not fit


def test_nested_tasks_clear_and_outer_summarises(tty: tuple[FakeTTY, Clock]) -> None:
    stream, clock = tty
    with progress.task("outer", total=2, unit="steps") as outer:
        outer.advance()
        with progress.task("inner", total=3, unit="versions") as inner:
            clock.t += 0.2
            inner.advance()
            assert progress.current() is inner
            outer.advance(0)  # not the innermost: counts, never draws over the inner line
            assert outer.draws == 1
        assert stream.getvalue().endswith("\r")  # the inner line was cleared, no newline left behind
        clock.t += 0.2
        outer.advance()
    assert "inner:" in stream.getvalue() and screen_of(stream.getvalue()) == [last_line(stream), ""]  # no inner left
    assert last_line(stream).startswith("outer: 100%|")  # the outermost task's final line
    assert last_line(stream).endswith("| 2/2 [00:00<00:00,  5.00 steps/s]")


def screen_of(text: str) -> list[str]:
    """What a terminal shows after ``text``: carriage returns move to the first column, characters overwrite."""
    lines: list[str] = []
    line: list[str] = []
    col = 0
    for c in text:
        if c == "\r":
            col = 0
        elif c == "\n":
            lines.append("".join(line).rstrip())
            line, col = [], 0
        else:
            line[col : col + 1] = [c]
            col += 1
    return [*lines, "".join(line).rstrip()]


def test_a_shorter_line_leaves_nothing_of_a_longer_one(tty: tuple[FakeTTY, Clock]) -> None:
    stream, clock = tty

    def drawn() -> str:
        return screen_of(stream.getvalue())[-1]

    with progress.task("the outer operation", unit="rows") as outer:
        outer.advance(123_456, bytes=10**7)
        assert drawn() == "the outer operation: 123456 rows [00:00, ? rows/s, 9.5 MiB]"
        with progress.task("short", total=3, unit="v") as inner:
            inner.advance()
            assert re.fullmatch(r"short:  33%\|#+ +\| 1/3 \[00:00<\?, \? v/s\]", drawn()) and len(drawn()) == 79
        assert drawn() == ""  # cleared
        clock.t += 1
        outer.advance(1)
        assert drawn() == "the outer operation: 123457 rows [00:01, 123457.00 rows/s, 9.5 MiB]"
        with progress.task("x", unit="v") as inner:  # an inner line over the outer one's
            inner.advance()
            assert drawn() == "x: 1 v [00:00, ? v/s]"
    assert screen_of(stream.getvalue()) == [outer._bar.format_meter(**outer._bar.format_dict), ""]


def test_ascii_terminal(tty: tuple[FakeTTY, Clock]) -> None:
    _, clock = tty
    ascii_tty = io.TextIOWrapper(io.BytesIO(), encoding="ascii")  # a C-locale terminal: ASCII only
    t = progress.Task("w", total=4, stream=ascii_tty, clock=clock, width=20, delay=0)
    progress._stack.append(t)
    clock.t += 1
    t.update(done=1, bytes=2048)
    t.close()
    ascii_tty.flush()
    raw: bytes = ascii_tty.buffer.getvalue()  # type: ignore[attr-defined]
    drawn = raw.decode("ascii")  # (fails on any other character)
    lines = [f for f in drawn.replace("\n", "\r").split("\r") if f]
    assert len(lines) == 2 and all(ln.startswith("w:  25%|") and len(ln) == 19 for ln in lines)  # not the 20th


def test_a_failed_task_leaves_no_line(tty: tuple[FakeTTY, Clock]) -> None:
    stream, _ = tty
    with pytest.raises(ValueError), progress.task("failing", total=10) as t:
        t.advance(3)
        raise ValueError("boom")
    assert stream.getvalue().replace(" ", "").strip("\r").startswith("failing:")
    assert stream.getvalue().endswith("\r") and "\n" not in stream.getvalue()


def test_switches(tty: tuple[FakeTTY, Clock], monkeypatch: pytest.MonkeyPatch) -> None:
    assert progress.enabled()
    assert not progress.enabled(io.StringIO())  # not a terminal
    monkeypatch.setenv(progress.ENV, "0")
    assert not progress.enabled()
    progress.set_enabled(True)  # the API switch overrides the environment ...
    assert progress.enabled() and not progress.enabled(io.StringIO())  # ... but never draws into a file
    progress.set_enabled(None)
    monkeypatch.setenv(progress.ENV, "1")
    assert progress.enabled()
    monkeypatch.setenv("TERM", "dumb")  # a terminal that cannot redraw a line
    assert not progress.enabled()
    monkeypatch.setenv("TERM", "xterm")
    with progress.disabled():
        assert not progress.enabled()
        with progress.task("x") as t:
            assert not t.active
    assert progress.enabled()
    logger = logging.getLogger("dal")
    before = logger.level
    try:
        logger.setLevel(logging.WARNING)  # the dal logger turned down: no progress either
        assert not progress.enabled()
        logging.getLogger("dal.progress").setLevel(logging.INFO)
        assert progress.enabled()
    finally:
        logger.setLevel(before)
        logging.getLogger("dal.progress").setLevel(logging.NOTSET)
    with pytest.raises(dal.DalError):
        progress.set_enabled("yes")  # type: ignore[arg-type]


def test_counted_reader_and_each(tty: tuple[FakeTTY, Clock]) -> None:
    table = pa.table({"a": list(range(10))})
    reader = table.to_reader()
    assert progress.counted(reader) is reader  # no task: untouched
    with progress.task("w", total=10) as t:
        out = pa.Table.from_batches(list(progress.counted(table.to_reader(), chunk_rows=3)))
        assert out.equals(table) and t.done == 10 and t.bytes == table.nbytes
        assert [b.num_rows for b in progress.counted(table.to_reader(), chunk_rows=4)] == [4, 4, 2]
    with progress.task("e", unit="files") as t:
        items = list(progress.each(["a", "bb", "ccc"], "each", unit="files", bytes_of=len))
        assert items == ["a", "bb", "ccc"]
    with progress.disabled():
        assert list(progress.each(range(3), "off")) == [0, 1, 2]


def test_absorbing_task_names_the_inner_work(tty: tuple[FakeTTY, Clock]) -> None:
    stream, clock = tty
    with progress.task("converting the DataFrame", absorb=True) as outer:
        with progress.task("writing dal_cache.converted", total=4) as inner:
            assert inner is outer
            clock.t += 1
            inner.advance(4)
        with progress.task("recording versions", unit="versions") as sync:
            assert sync is not outer  # only the first nested task is absorbed
    assert last_line(stream).startswith("converting the DataFrame: 100%|")
    assert last_line(stream).endswith("| 4/4 [00:01<00:00,  4.00 rows/s]")


def test_formatting_helpers() -> None:
    assert progress.columns("ab") == 2 and progress.columns("数据") == 4 and progress.columns("e\u0301") == 1
    assert progress.size_text(512) == "512 B"
    assert progress.size_text(1536) == "1.5 KiB"
    assert progress.size_text(48 * 1024**2) == "48.0 MiB"
    assert progress.rows_of(pd.DataFrame({"a": [1, 2, 3]})) == 3
    assert progress.rows_of(pa.table({"a": [1]})) == 1
    assert progress.rows_of([{"a": 1}, {"a": 2}]) == 2
    assert progress.rows_of(pa.table({"a": [1]}).to_reader()) is None


def test_petastorm_write_and_sync_count_files_and_versions(tty: tuple[FakeTTY, Clock], sqlite_env: object) -> None:
    """A Petastorm write counts rows, files and bytes per written file; its sync counts the version records."""
    import numpy as np
    import pyarrow.dataset as pads

    from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema

    stream, _ = tty
    schema = TensorSchema("P", [TensorField("id", np.int64, (), ScalarCodec()),
                                TensorField("part", np.int64, (), ScalarCodec()),
                                TensorField("m", np.float32, (2,), NdarrayCodec())])  # fmt: skip
    rows = [{"id": i, "part": i % 3, "m": np.full(2, i, np.float32)} for i in range(30)]
    with progress.task("petastorm", absorb=True) as t:
        v = dal.write(rows, "p.t", format="petastorm", schema=schema, partition_by=["part"])
    assert (t.done, t.files, t.bytes) == (30, 3, v.size_bytes)
    root = dal.get_catalog().get_dataset("p.t").location.removeprefix("file://")
    found = pads.dataset(root, format="parquet", exclude_invalid_files=True, ignore_prefixes=["_", "."])
    assert len(found.files) == 3 and found.count_rows() == 30  # what the line counted, as pyarrow finds it
    assert last_line(stream).startswith("petastorm: 100%|")
    assert last_line(stream).endswith(f"| 30/30 [00:00<?, ? rows/s, 3 files, {progress.size_text(v.size_bytes)}]")
    assert "reading the Petastorm records of " in stream.getvalue()


@pytest.mark.spark
def test_spark_write_through_the_converter_counts_staged_files(
    tty: tuple[FakeTTY, Clock], spark: Any, tmp_path: Path
) -> None:
    """dal.convert's line (its write, under the converter's name) follows the executors' staged files
    (accumulators), ending at the exact totals of the version it wrote, as delta-rs lists its files (one file:
    the small DataFrame is coalesced towards dal.write's target file size)."""
    stream, _ = tty
    df = spark.range(0, 10_000, numPartitions=2).selectExpr("id", "id * 2 AS x")  # type: ignore[attr-defined]
    ds = dal.convert(df, cache_dir=str(tmp_path / "cache"))
    v = ds.version
    assert v.row_count == 10_000
    table = DeltaTable(ds.info.location)
    assert v.file_count == len(table.file_uris()) and table.to_pyarrow_table().num_rows == 10_000
    files = f"{v.file_count} file{'s' if v.file_count != 1 else ''}"
    summary = f"converting the DataFrame: 10000 rows [00:00, ? rows/s, {files}, "
    assert last_line(stream) == summary + f"{progress.size_text(v.size_bytes)}]", stream.getvalue()
    frames_drawn = frames(stream)
    assert all(f.startswith(("converting the DataFrame: ", "recording versions of ", "reading the Delta log of "))
               for f in frames_drawn if f.strip())  # fmt: skip
