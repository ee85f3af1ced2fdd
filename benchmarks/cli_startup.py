"""Start-up cost of the ``dal`` command: CPU (user + sys of the whole process) and wall time, median of N runs,
beside a minimal click CLI in the same run (the ratio is what to compare across machines). The runs are
interleaved: N rounds, each running every command once (each round starting one command further along).

Runs ``import dal``, ``dal --help``, ``dal ls``, ``dal show NAME``, ``dal versions NAME`` and two shell
completions (``dal show weather.<TAB>``, ``dal lineage NAME <TAB>``) against a small fresh catalog on SQLite and,
when it answers, on PostgreSQL; and ``dal ls`` on a named catalog that does not exist (an error line; the full
Catalog path, for contrast).

    .venv/bin/python benchmarks/cli_startup.py [--runs 15] [--backends sqlite,postgres]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import sqlalchemy as sa

from dal.catalog import Catalog, Schema, VersionDraft
from dal.catalog.types import Field

PG_URL = os.environ.get("DAL_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
MINIMAL_CLICK = """
import click
@click.group()
def cli():
    pass
@cli.command()
def ls():
    click.echo("nothing")
cli()
"""


def measure(args: list[str], env: dict[str, str], *, check: bool = True) -> tuple[float, float]:
    """Wall and CPU seconds (user + sys, the reaped process) of one run of ``args``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(args, env=env, check=check, capture_output=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def interleaved(rows: list[tuple[str, list[str], dict[str, str]]], env: dict[str, str],
                runs: int) -> dict[str, tuple[float, float]]:  # fmt: skip
    """Median wall and CPU seconds per row over ``runs`` rounds; each round runs every row once, starting one
    row further along than the round before, so load elsewhere on the machine falls on every row alike."""
    walls: dict[str, list[float]] = {label: [] for label, _, _ in rows}
    cpus: dict[str, list[float]] = {label: [] for label, _, _ in rows}
    for r in range(runs):
        for label, args, extra in rows[r % len(rows) :] + rows[: r % len(rows)]:
            wall, cpu = measure(args, {**env, **extra}, check="missing" not in label)
            walls[label].append(wall)
            cpus[label].append(cpu)
    return {label: (statistics.median(walls[label]), statistics.median(cpus[label])) for label in walls}


def populate(url: str) -> None:
    cat = Catalog(url)
    schema = Schema((Field("id", "int64"), Field("ts", "timestamp[us, tz=UTC]")))
    for name in ("weather.obs", "weather.radar", "sensors.cam"):
        cat.create_dataset(name, format="delta", location=f"/data/{name}")
        for i in range(5):
            cat.publish(name, VersionDraft("append", schema, 10 * i, tags=("prod",) if i == 3 else ()))
    cat.close()


def run(backend: str, runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        schema = f"dal_bench_cli_{uuid.uuid4().hex[:8]}"
        if backend == "sqlite":
            url = f"sqlite:///{Path(tmp) / 'catalog.db'}"
        else:
            eng = sa.create_engine(PG_URL)
            with eng.begin() as c:
                c.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
            url = f"{PG_URL}{'&' if '?' in PG_URL else '?'}options=-csearch_path%3D{schema}"
        try:
            populate(url)
            env = {**os.environ, "DAL_CATALOG_URL": url, "DAL_HOME": tmp}
            dal = [sys.executable, "-m", "dal.cli"]
            rows = [
                ("minimal click CLI (baseline)", [sys.executable, "-c", MINIMAL_CLICK, "ls"], {}),
                ("python -c 'import dal'", [sys.executable, "-c", "import dal"], {}),
                ("dal --help", [*dal, "--help"], {}),
                ("dal ls", [*dal, "ls"], {}),
                ("dal show weather.obs", [*dal, "show", "weather.obs"], {}),
                ("dal versions weather.obs", [*dal, "versions", "weather.obs"], {}),
                ("TAB: dal show weather.<TAB>", dal,
                 {"_DAL_COMPLETE": "bash_complete", "COMP_WORDS": "dal show weather.", "COMP_CWORD": "2"}),
                ("TAB: dal lineage weather.obs <TAB>", dal,
                 {"_DAL_COMPLETE": "bash_complete", "COMP_WORDS": "dal lineage weather.obs ", "COMP_CWORD": "3"}),
            ]  # fmt: skip
            if backend == "sqlite":
                # a named catalog that does not exist: one error line, nothing created (the full Catalog path)
                fresh = {"DAL_CATALOG_URL": f"sqlite:///{Path(tmp) / 'new' / 'catalog.db'}"}
                rows.append(("dal ls, named catalog missing (error, full path)", [*dal, "ls"], fresh))
            medians = interleaved(rows, env, runs)
            print(f"\n## {backend}: median of {runs} interleaved rounds\n")
            print(f"| {'command':52} | {'CPU s':>6} | {'wall s':>6} | {'CPU x click':>11} |")
            print(f"|{'-' * 54}|{'-' * 7}:|{'-' * 7}:|{'-' * 12}:|")
            base = medians[rows[0][0]][1]
            for label, _, _ in rows:
                wall, cpu = medians[label]
                print(f"| {label:52} | {cpu:6.3f} | {wall:6.3f} | {cpu / base:11.1f} |", flush=True)
        finally:
            if backend == "postgres":
                with eng.begin() as c:
                    c.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
                eng.dispose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--backends", default="sqlite,postgres")
    args = ap.parse_args()
    for backend in args.backends.split(","):
        run(backend.strip(), args.runs)


if __name__ == "__main__":
    main()
