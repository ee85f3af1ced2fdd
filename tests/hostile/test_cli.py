"""The CLI with hostile arguments: one ``dal: error:`` line (exit 1 or click's 2), never an internal error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def dal_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dal.cli", *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )


@pytest.mark.parametrize("older", ["999999999w", "9999999999999d"])
def test_gc_with_a_duration_beyond_a_timedelta(tmp_path: Path, older: str) -> None:
    proc = dal_cli("--catalog", f"sqlite:///{tmp_path}/c.db", "gc", "--older-than", older, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    assert "--older-than" in proc.stderr and ("too long a duration" in proc.stderr or "not a duration" in proc.stderr)
