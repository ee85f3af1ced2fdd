"""``benchmarks/register_bench.py`` runs (issue #34: register, sync, ``dal head`` and ``dal stats`` against
delta-rs, interleaved, each process's CPU counted): a small run prints every row with both engines' times and
CPU."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_a_small_run_prints_every_comparison(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp_path)}
    command = [sys.executable, str(REPO / "benchmarks" / "register_bench.py"), "--sizes", "120", "--commits", "2",
               "--repeat", "1", "--appends", "1"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    table_lines = done.stdout.split("| what |", 1)[1].splitlines()  # the final table (progress lines before it)
    rows = [line for line in table_lines if line.startswith("| ") and " s |" in line]
    labels = [row.split(" | ")[0] for row in rows]
    table = "120 files, 2 commit(s)"
    assert labels == [
        f"| register: {table}",
        f"| `dal head -n 3`: {table}",
        f"| `dal stats`: {table}",
        f"| sync of one 10-file commit (1): {table}",
    ]
    number = r"\d+\.\d+"
    for row in rows:  # dal min / median, its CPU, delta-rs min / median, its CPU, both ratios
        assert re.fullmatch(
            rf"\| .+ \| {number} / {number} s \| {number} s \| {number} / {number} s \| {number} s \| "
            rf"{number}x / {number}x \| {number}x \|",
            row,
        ), row
    assert not list(tmp_path.glob("dal-register-bench-*"))  # its tables are removed
