"""A hostile dal config file (issue #32): nested 100k deep (a RecursionError: ``dal`` exited 70 as an internal
error, ``dal.open`` raised it raw), not UTF-8, or larger than any config file is a ``ProfileError`` naming the
file: one ``dal: error:`` line and exit 1 on the command line, a ``DalError`` from ``dal.open``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import dal
from dal.catalog.home import ProfileError

CONFIGS = {
    "deep-arrays": ("x = " + "[" * 100_000 + "]" * 100_000 + "\n").encode(),
    "deep-arrays-just-past-the-stack": ("x = " + "[" * 2_000 + "]" * 2_000 + "\n").encode(),
    "deep-inline-tables": ("x = " + "{a = " * 50_000 + "1" + "}" * 50_000 + "\n").encode(),
    "deep-in-a-profile": ('default = "p"\n[catalogs.p]\nurl = "sqlite:///x.db"\ny = ' + "[" * 10_000 + "\n").encode(),
    "not-utf8": b'default = "\xff\xfe"\n',
    "two-mib": b"# " + b"x" * (2 << 20) + b'\ndefault = "p"\n',
}
MESSAGES = {"not-utf8": "is not UTF-8 text", "two-mib": "is larger than 1 MiB"}


@pytest.mark.parametrize("kind", CONFIGS)
def test_a_hostile_config_file_is_one_user_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    config = tmp_path / "config.toml"
    config.write_bytes(CONFIGS[kind])
    expected = f"the dal config file {config} {MESSAGES.get(kind, 'is nested too deeply')}"
    monkeypatch.setenv("DAL_CONFIG", str(config))
    proc = subprocess.run([sys.executable, "-m", "dal.cli", "ls"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith(f"dal: error: {expected}"), proc.stderr
    with pytest.raises(ProfileError, match=expected.replace(".", r"\.")):
        dal.open("a.b")
