"""Ctrl-C at ``dal drop``'s confirmation prompt (a real pseudo-terminal): the prompt's line ended, one
``dal: interrupted`` line and exit 130, as every other command (not click's ``Aborted!`` and 1), and nothing was dropped. Answering "n"
still declines (``Aborted!``, exit 1)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from tests.cli.test_progress import readable


def _dal() -> str:
    exe = shutil.which("dal", path=os.path.dirname(sys.executable))
    assert exe
    return exe


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DAL_PROGRESS", "PYTEST_CURRENT_TEST"}}
    env.update(DAL_CATALOG_URL=f"sqlite:///{tmp_path}/c.db", DAL_WAREHOUSE=str(tmp_path / "wh"), TERM="xterm")
    return env


def _registered(tmp_path: Path) -> dict[str, str]:
    env = _env(tmp_path)
    table = tmp_path / "t"
    write_deltalake(str(table), pa.table({"id": [1, 2, 3]}))
    done = subprocess.run([_dal(), "register", "d.t", str(table)], env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return env


def _wait_until_reading(pid: int) -> None:
    """Wait until the process's main thread is blocked reading the terminal. "[y/N]:" is drawn before the prompt
    calls input(), and a SIGINT that lands inside input() before its read() starts is recorded by Python but
    interrupts nothing (a window of microseconds, which a loaded machine widens): the test would then hang on
    the read, not on anything a person pressing Ctrl-C could meet."""
    wchan = Path(f"/proc/{pid}/wchan")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            where = wchan.read_text().strip()
        except OSError:
            return
        if where in {"wait_woken", "n_tty_read"}:
            return
        time.sleep(0.05)


def _at_prompt(env: dict[str, str], args: list[str], answer: bytes | None) -> tuple[int, str]:
    """Run ``dal`` on a pty (a terminal: stdin, stdout and stderr); at the confirmation prompt send SIGINT
    (what the terminal sends on Ctrl-C) or type ``answer``. The screen: what stdout and stderr drew."""
    master, slave = os.openpty()
    proc = subprocess.Popen([_dal(), *args], stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    screen, sent, deadline = b"", False, time.monotonic() + 60
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            ready = readable([master], 0.2)
            if not ready:
                continue
            try:
                screen += os.read(master, 65536)
            except OSError:
                break
            if not sent and b"[y/N]:" in screen:
                if answer is None:
                    _wait_until_reading(proc.pid)
                    proc.send_signal(signal.SIGINT)
                else:
                    os.write(master, answer)
                sent = True
        code = proc.wait(timeout=30)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    assert sent, screen
    return code, screen.decode(errors="replace")


def _names(env: dict[str, str]) -> list[str]:
    listed = subprocess.run([_dal(), "ls", "--json"], env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    return [d["name"] for d in json.loads(listed.stdout)]


@pytest.mark.slow
@pytest.mark.parametrize("purge", [False, True])
def test_ctrl_c_at_the_drop_prompt(tmp_path: Path, purge: bool) -> None:
    env = _registered(tmp_path)
    files = sorted(p for p in (tmp_path / "t").rglob("*") if p.is_file())
    code, screen = _at_prompt(env, ["drop", "d.t", *(["--purge"] if purge else [])], None)
    assert code == 130, screen
    assert screen.endswith("[y/N]: \r\ndal: interrupted\r\n"), screen  # the prompt's line ended, one line
    assert screen.count("\n") == 2 and "Aborted" not in screen and "Traceback" not in screen
    assert _names(env) == ["d.t"]  # nothing was dropped
    assert sorted(p for p in (tmp_path / "t").rglob("*") if p.is_file()) == files  # nor deleted


@pytest.mark.slow
def test_answering_no_still_declines(tmp_path: Path) -> None:
    env = _registered(tmp_path)
    code, screen = _at_prompt(env, ["drop", "d.t"], b"n\n")
    assert code == 1 and screen.endswith("Aborted!\r\n"), screen
    assert _names(env) == ["d.t"]
