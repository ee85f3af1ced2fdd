"""Fuzz the ``dal`` CLI with hostile arguments: it exits 0, or exits 1 with exactly one ``dal: error:`` line on
stderr; never a traceback, never a raw control character on stdout or stderr.

Seeded and time-bounded through click's runner; a few fixed hostile cases through the real console script."""

from __future__ import annotations

import csv
import io
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner

import dal
from dal.catalog import Catalog
from dal.cli.app import cli
from tests.fuzz.hostile import SEED, budget, hostile_str

RAW_CONTROL = {chr(c) for c in range(32) if chr(c) not in "\n"} | {"\x7f", "\u202e", "\u200b"}


@pytest.fixture
def url(sqlite_env: Catalog) -> str:
    dal.write(pa.table({"id": [1, 2, 3], "part": ["a", "b", "a"]}), "ds", partition_by=["part"], tags=["prod"])
    dal.write(pa.table({"id": [4], "part": ["b"]}), "ds", description="second \x1b[31m[bold]x[/]")
    return sqlite_env.url


def word(rng: random.Random) -> str:
    return rng.choice(["ds", "ds", "prod", "0", "1", hostile_str(rng)])


def command(rng: random.Random, root: str) -> list[str]:
    """A command line: options first, then ``--`` so that hostile positionals like ``-1`` stay arguments."""
    pick = rng.choice(["ls", "show", "versions", "schema", "diff", "partitions", "tag", "untag", "register", "sync"])
    options = ["--json"] if rng.random() < 0.3 and pick not in ("untag",) else []
    positionals: list[str]
    if pick == "ls":
        positionals = [word(rng)] if rng.random() < 0.7 else []
    elif pick in ("show", "versions", "sync"):
        positionals = [word(rng)]
    elif pick in ("schema", "partitions"):
        options += ["--version", word(rng)]
        positionals = [word(rng)]
    elif pick == "diff":
        positionals = [word(rng), word(rng), word(rng)]
    elif pick == "tag":
        options += ["--force"] if rng.random() < 0.3 else []
        positionals = [word(rng), word(rng), word(rng)]
    elif pick == "untag":
        positionals = [word(rng), word(rng)]
    else:
        where = rng.choice([f"{root}/{hostile_str(rng)}", f"memory://fuzz/{hostile_str(rng)}", hostile_str(rng)])
        if where.startswith("/") and not where.startswith(root):  # runs as root: never register '/' or '/etc'
            where = f"{root}/{where}"
        options += ["--format", rng.choice(["delta", "petastorm", "parquet", word(rng)]), "--description",
                    hostile_str(rng), *(["--time-column", word(rng)] if rng.random() < 0.3 else [])]  # fmt: skip
        positionals = [word(rng), where]
    return [pick, *options, "--", *positionals]


def check_outcome(args: list[str], code: int, out: str, err: str) -> str | None:
    """None if the outcome is acceptable, else what is wrong."""
    if "Traceback" in out + err:
        return "a traceback"
    # a tab separates the cells of tsv (stdout off a terminal) and is escaped inside them
    if RAW_CONTROL & set(err) or (RAW_CONTROL - {"\t"}) & set(out):
        return "a raw control character in the output"
    if "\t" in out:
        rows = list(csv.reader(io.StringIO(out), delimiter="\t"))
        if len(rows) != out.count("\n") or len({len(r) for r in rows}) != 1:
            return "tsv that is not one row per line with the header's cells"
    if code == 0:
        return None
    if code != 1:
        return f"exit code {code}: {err[-300:]!r}"
    if "--json" in args[: args.index("--")] if "--" in args else "--json" in args:
        # with --json an error is one JSON object on stderr
        try:
            body = json.loads(err)
        except ValueError:
            return f"not one JSON error object: {err[:300]!r}"
        if err.count("\n") != 1 or not body.get("error") or body.get("exit_code") != 1:
            return f"not one JSON error object: {err[:300]!r}"
        return None
    if not err.startswith("dal: error: ") or err.count("\n") != 1:
        return f"not one 'dal: error:' line: {err[:300]!r}"
    return None


def test_fuzz_cli_through_click(url: str, tmp_path: Path) -> None:
    rng = random.Random(SEED + 10)
    root = f"{tmp_path}/a/b/c/loc"
    failures: dict[str, str] = {}
    ran = 0
    for _ in budget():
        args = command(rng, root)
        result = CliRunner().invoke(cli, ["--catalog", url, *args])
        ran += 1
        problem = check_outcome(args, result.exit_code, result.stdout, result.stderr)
        if problem:
            failures.setdefault(problem.split(":")[0] + f" ({args[0]})", f"{problem} from dal {args!r:.300}")
    assert not failures, f"{len(failures)} bad outcome(s) in {ran} commands:\n" + "\n".join(failures.values())


HOSTILE_ARGV = [
    ["show", "cam\n"],
    ["show", "\x1b[2J\x1b]0;x\x07"],
    ["schema", "ds", "--version", "²"],
    ["partitions", "ds", "--version", "' OR 1=1 --"],
    ["ls", "'; DROP TABLE dal_datasets; --"],
    ["register", "x", "memory://b/x?secret=hunter2", "--format", "petastorm"],
    ["diff", "ds", "0", "1" * 5000],
]


def test_fuzz_cli_through_the_real_console_script(url: str) -> None:
    """Hostile argv through the installed ``dal`` (its own process; NUL cannot be passed in argv)."""
    exe = shutil.which("dal", path=os.path.dirname(sys.executable))
    assert exe, "the dal console script is not installed in this environment"
    env: dict[str, Any] = {**os.environ, "DAL_CATALOG_URL": url, "RUST_BACKTRACE": "1"}
    problems = []
    for argv in HOSTILE_ARGV:
        proc = subprocess.run([exe, *argv], env=env, capture_output=True, text=True, timeout=120)
        problem = check_outcome(argv, proc.returncode, proc.stdout, proc.stderr)
        if problem or "hunter2" in proc.stdout + proc.stderr:
            problems.append(f"dal {argv!r:.120}: {problem or 'printed the secret'}")
    assert not problems, "\n".join(problems)


HOSTILE_CATALOG_URLS = [
    "sqlite:///\x00x",
    "postgresql://[::1",
    "postgresql://u@h:notaport/db",
    "\x1b[31m",
    "sqlite:///" + "a" * 5000,
    "mysql://u:hunter2@h/db",
    "sqlite:////etc/passwd",
    "sqlite:////proc/nope/catalog.db",
    "' OR 1=1 --",
]


@pytest.mark.parametrize("url", HOSTILE_CATALOG_URLS)
def test_hostile_catalog_urls_are_one_line(url: str) -> None:
    for args in (["ls"], ["db", "status"], ["db", "upgrade"]):
        result = CliRunner().invoke(cli, ["--catalog", url, *args])
        problem = check_outcome(args, result.exit_code, result.stdout, result.stderr)
        assert problem is None and "hunter2" not in result.output, f"dal --catalog {url!r:.60} {args}: {problem}"
