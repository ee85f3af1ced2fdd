"""Fault fixtures: a real tmpfs of a few MB for full-disk tests, and helpers to kill a writer at a pause point."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dal.catalog import Catalog
from tests.conftest import IN_CI, use_catalog

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cat(sqlite_or_served_env: Catalog) -> Catalog:
    """dal's default catalog for the test: SQLite, and the same faults through ``dal serve`` (the faults are the
    client's and its storage's). A module of Spark jobs pins it to SQLite: ``SQLITE_ONLY``."""
    return sqlite_or_served_env


SQLITE_ONLY = pytest.mark.parametrize("sqlite_or_served_env", ["sqlite"], indirect=True)


def _mount_tmpfs(folder: Path, size: str) -> str | None:
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True, text=True
    )
    return None if done.returncode == 0 else (done.stderr.strip() or f"mount exited {done.returncode}")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 4 MiB tmpfs (a disk that fills up); skipped with the reason where mounting is not permitted."""
    folder = tmp_path / f"disk-{uuid.uuid4().hex[:8]}"
    problem = _mount_tmpfs(folder, "4m")
    if problem:
        if IN_CI:
            pytest.fail(f"cannot mount a tmpfs for the full-disk tests: {problem}")
        pytest.skip(f"mounting a tmpfs is not permitted here ({problem}); full-disk tests need root")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path, leave: int = 0) -> Path:
    """Fill the filesystem of ``folder`` up to ``leave`` free bytes; returns the filler file (delete it to free)."""
    filler = folder / f"filler-{uuid.uuid4().hex[:6]}"
    with open(filler, "wb") as f:
        chunk = b"\0" * 65536
        while True:
            free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
            if free <= leave:
                break
            try:
                f.write(chunk[: max(1, min(len(chunk), free - leave))])
                f.flush()
            except OSError:
                break
    return filler


def start_paused(
    code: str, point: str, tmp_path: Path, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], Path]:
    """Run ``code`` in a fresh Python and wait until it pauses at ``point``; returns the process and the
    file whose creation lets it go on."""
    marker = tmp_path / f"paused-{uuid.uuid4().hex[:8]}"
    release = tmp_path / f"release-{uuid.uuid4().hex[:8]}"
    full_env = {**os.environ, **(env or {}), "DAL_TEST_PAUSE": point, "DAL_TEST_PAUSE_FILE": str(marker)}
    full_env["DAL_TEST_RELEASE_FILE"] = str(release)
    full_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), full_env.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env=full_env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 120
    while not marker.exists():
        if proc.poll() is not None:
            out = proc.stdout.read().decode() if proc.stdout else ""
            raise AssertionError(f"the writer exited ({proc.returncode}) before pausing at {point}:\n{out}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the writer never reached {point}")
        time.sleep(0.05)
    return proc, release


def run_until_paused(code: str, point: str, tmp_path: Path, env: dict[str, str] | None = None) -> None:
    """Run ``code`` in a fresh Python, wait until it pauses at ``point``, then SIGKILL it."""
    proc, _ = start_paused(code, point, tmp_path, env)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    if proc.stdout:
        proc.stdout.close()


def finish(proc: subprocess.Popen[bytes], release: Path) -> str:
    """Let a paused process go on; its output once it exited (AssertionError if it failed)."""
    release.touch()
    out, _ = proc.communicate(timeout=120)
    text = out.decode() if out else ""
    assert proc.returncode == 0, text
    return text


def use(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Catalog:
    return use_catalog(url, tmp_path, monkeypatch)
