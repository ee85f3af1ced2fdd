"""Adversarial progress probes: names wider than their length (East Asian wide characters) are cut by terminal
columns, never wrapped; control characters never reach the terminal; Ctrl-C during a drawn line leaves one
clean ``dal: interrupted`` line, exit 130, and nothing half-registered."""

from __future__ import annotations

import fcntl
import io
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
import unicodedata
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from dal import progress
from dal.catalog import Catalog
from tests.cli.test_progress import readable


class TTY(io.StringIO):
    encoding = "utf-8"

    def isatty(self) -> bool:
        return True


def cols(text: str) -> int:
    """Terminal columns, computed here from the Unicode tables (not with dal's own helper)."""
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in text
    )


def frames(stream: TTY) -> list[str]:
    return [f for f in stream.getvalue().replace("\n", "\r").split("\r") if f.strip()]


@pytest.mark.parametrize(
    "label",
    [
        "writing 数据集名称" * 6,  # 2 columns per character
        "writing " + "".join(chr(0xFF41 + i) for i in range(26)) * 2,  # fullwidth forms (U+FF41..)
        "writing " + "e\u0301" * 60,  # combining accents take no column
        "writing \x1b[2J\x07" + "é" * 50,  # control characters: escaped, then cut
    ],
)
def test_a_line_never_takes_more_columns_than_the_terminal(label: str) -> None:
    stream, now = TTY(), [0.0]
    t = progress.Task(label, total=100, stream=stream, width=40, delay=0, clock=lambda: now[0])
    progress._stack.append(t)
    try:
        for _ in range(3):
            now[0] += 1
            t.advance(10)
    finally:
        t.close()
    drawn = frames(stream)
    assert len(drawn) == 4  # three redraws and the summary
    for f in drawn:
        assert cols(f.rstrip()) <= 39, f
        assert "\x1b" not in f and "\x07" not in f


def test_a_narrow_line_after_a_wide_one_blanks_all_its_columns() -> None:
    stream, now = TTY(), [0.0]
    wide = progress.Task("写" * 10, stream=stream, width=80, delay=0, clock=lambda: now[0])
    progress._stack.append(wide)
    wide.advance(1)
    narrow = progress.Task("ab", stream=stream, width=80, delay=0, clock=lambda: now[0])
    progress._stack.append(narrow)
    narrow.advance(1)
    *_, drawn, blanks, _, last = stream.getvalue().split("\r")  # the wide line, blanks, the narrow line
    narrow.close(ok=False)
    wide.close(ok=False)
    assert progress._stack == []
    assert drawn.startswith("写" * 10) and last.startswith("ab: 1 rows")
    # the wide line took 20 columns for its name: blanks over every one of them before the narrow one is drawn
    assert blanks.strip() == "" and len(blanks) >= cols(drawn), (drawn, blanks, last)


def _dal() -> str:
    exe = shutil.which("dal", path=os.path.dirname(sys.executable))
    assert exe
    return exe


@pytest.mark.slow
def test_ctrl_c_during_a_progress_line(tmp_path: Path) -> None:
    """SIGINT while `dal register` draws its line: the line is cleared, one `dal: interrupted` line, exit 130
    (not click's `Aborted!` and 1, the exit of a user error), and the dataset is not half-registered."""
    table = str(tmp_path / "history")
    for i in range(80):
        write_deltalake(table, pa.table({"id": [i]}), mode="append")
    env = {k: v for k, v in os.environ.items() if k not in {"DAL_PROGRESS", "PYTEST_CURRENT_TEST"}}
    paused = tmp_path / "paused"  # held before recording (the line is up): SIGINT lands inside register, however
    # fast describing the versions is on a loaded machine (it used to be sent after the register had finished)
    env.update(DAL_CATALOG_URL=f"sqlite:///{tmp_path}/c.db", DAL_WAREHOUSE=str(tmp_path / "wh"),
               DAL_PROGRESS_DELAY="0", TERM="xterm", DAL_TEST_PAUSE="versions-recording",
               DAL_TEST_PAUSE_FILE=str(paused))  # fmt: skip
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen([_dal(), "register", "h.t", table], stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    screen, sent, deadline = b"", False, time.monotonic() + 90
    try:
        while time.monotonic() < deadline:
            if not sent and paused.exists() and b"\r" in screen:  # its line drawn, the versions not recorded
                proc.send_signal(signal.SIGINT)
                sent = True
            ready = readable([master], 0.2)
            if not ready:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:
                data = b""
            if not data:
                break
            screen += data
        code = proc.wait(timeout=30)
    finally:
        os.close(master)
    text = screen.decode(errors="replace")
    assert sent, text
    assert code == 130, text
    assert text.endswith("dal: interrupted\r\n"), text
    assert "Traceback" not in text and "Aborted" not in text
    listed = subprocess.run([_dal(), "ls", "--json"], env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and "h.t" not in [d["name"] for d in json.loads(listed.stdout)]


def test_ctrl_c_in_json_mode_is_one_json_error(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from dal.cli import app as cli_module

    def interrupted(*_a: object, **_k: object) -> None:
        raise KeyboardInterrupt

    runner = CliRunner()
    env = {"DAL_CATALOG_URL": f"sqlite:///{tmp_path}/c.db", "DAL_WAREHOUSE": str(tmp_path / "wh")}
    Catalog(env["DAL_CATALOG_URL"])  # gc needs a catalog that exists (a missing one is an error before gc runs)
    mp = pytest.MonkeyPatch()
    try:
        import dal.ops.lifecycle

        mp.setattr(dal.lifecycle, "gc", interrupted)
        plain = runner.invoke(cli_module.cli, ["gc", "a.b"], env=env)
        as_json = runner.invoke(cli_module.cli, ["gc", "a.b", "--json"], env=env)
    finally:
        mp.undo()
    assert plain.exit_code == 130 and plain.stderr.strip() == "dal: interrupted"
    assert as_json.exit_code == 130
    assert json.loads(as_json.stderr) == {"error": "interrupted", "type": "KeyboardInterrupt", "exit_code": 130}


def test_a_log_record_during_a_drawn_line_starts_at_column_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    """A warning logged while the line is drawn by a handler writing to the same terminal:
    the line is cleared first, the message stands on its own line, and the progress line comes back after it."""
    import logging

    stream, now = TTY(), [0.0]
    handler = logging.StreamHandler(stream)  # as logging.basicConfig() makes (pytest holds the root logger's)
    monkeypatch.setattr(logging.getLogger("dal"), "handlers", [handler])
    monkeypatch.setattr(logging.getLogger("dal"), "propagate", False)
    monkeypatch.setattr(progress, "_stderr", lambda: stream)
    monkeypatch.setattr(progress, "_now", lambda: now[0])
    monkeypatch.setattr(progress, "_width", lambda _s: 80)
    monkeypatch.setenv(progress.ENV_DELAY, "0")
    monkeypatch.delenv(progress.ENV, raising=False)
    monkeypatch.setenv("TERM", "xterm")
    before = progress.get_enabled()
    progress.set_enabled(None)
    try:
        with progress.task("writing probe.t", total=10) as t:
            now[0] += 1
            t.advance(3)
            logging.getLogger("dal.probe").warning("lineage not recorded")
            now[0] += 1
            t.advance(3)
    finally:
        progress.set_enabled(before)
    first = stream.getvalue().split("\n")[0].split("\r")
    assert first[-1] == "lineage not recorded", first  # written from column 0 ...
    assert first[-2].strip() == "" and len(first[-2]) >= len(first[-3])  # ... over the blanked progress line
    after = stream.getvalue().split("lineage not recorded\n", 1)[1]
    assert after.startswith("\rwriting probe.t:  60%|") and "| 6/10 [" in after  # back at the next update
    assert progress._stack == [] and progress._hooked == []
    assert handler.filters == []
