"""The CLI with hostile arguments: one ``dal: error:`` line (exit 1 or click's 2), never an internal error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
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


READ_ONLY = [
    ["ls"],
    ["ls", "--json"],
    ["show", "a.b"],
    ["versions", "a.b"],
    ["schema", "a.b"],
    ["diff", "a.b", "0", "1"],
    ["partitions", "a.b"],
    ["files", "a.b"],
    ["lineage", "a.b", "0"],
    ["head", "a.b"],
    ["stats", "a.b"],
    ["ui", "--port", "0"],
    # commands that change datasets already recorded: on a catalog that does not exist there is nothing to
    # change, so they do not create one either
    ["tag", "a.b", "0", "t"],
    ["untag", "a.b", "t"],
    ["rename", "a.b", "c.d"],
    ["set", "a.b", "--description", "x"],
    ["drop", "a.b", "--yes"],
    ["gc", "a.b"],
]


@pytest.mark.parametrize("args", READ_ONLY, ids=lambda a: " ".join(a))
def test_read_only_commands_create_no_catalog(tmp_path: Path, args: list[str]) -> None:
    """Issue #22/#27: a mistyped --catalog made folders and an empty catalog and answered "no datasets yet"."""
    missing = tmp_path / "nonexistent" / "dir" / "x.db"
    proc = dal_cli("--catalog", f"sqlite:///{missing}", *args, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(("dal: error: ", "{")), proc.stderr
    assert "no catalog at" in proc.stderr and str(missing) in proc.stderr and "dal db upgrade" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_ls_on_a_fresh_machine_lists_nothing_and_creates_nothing(tmp_path: Path) -> None:
    """The embedded default catalog (no --catalog, profile or $DAL_CATALOG_URL) not made yet: `dal ls` says
    "no datasets yet" (exit 0) as before, and still creates no file or folder; a named catalog that is
    missing stays an error (above)."""
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAL_")}
    env.update(DAL_HOME=str(home), HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    for args in (["ls"], ["ls", "--json"]):
        proc = subprocess.run([sys.executable, "-m", "dal.cli", *args], capture_output=True, text=True,
                              timeout=120, cwd=tmp_path, env=env)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        if args[-1] == "--json":
            assert proc.stdout.strip() == "[]"
        else:  # stdout a pipe: tsv, the header line, and the note on stderr
            assert proc.stdout == "name\tformat\tlatest\tupdated\tdescription\n"
            assert proc.stderr == "no datasets yet (the first write creates the catalog)\n"
    assert not home.exists()
    shown = subprocess.run([sys.executable, "-m", "dal.cli", "show", "a.b"], capture_output=True, text=True,
                           timeout=120, cwd=tmp_path, env=env)  # fmt: skip
    assert shown.returncode == 1 and "no catalog at" in shown.stderr
    assert not home.exists()


def test_writes_still_create_the_catalog(tmp_path: Path) -> None:
    missing = tmp_path / "new" / "dir" / "x.db"
    data = tmp_path / "t"
    data.mkdir()
    pq.write_table(pa.table({"a": [1, 2]}), data / "part-0.parquet")
    url = f"sqlite:///{missing}"
    proc = dal_cli("--catalog", url, "register", "a.b", str(data), "--format", "parquet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert missing.is_file()
    assert "a.b" in dal_cli("--catalog", url, "ls", cwd=tmp_path).stdout
    up = dal_cli("--catalog", f"sqlite:///{tmp_path}/other/y.db", "db", "upgrade", cwd=tmp_path)
    assert up.returncode == 0 and (tmp_path / "other" / "y.db").is_file(), up.stderr
