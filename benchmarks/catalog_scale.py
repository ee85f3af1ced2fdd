"""The catalog at scale: 10,000 datasets x 100 versions (1M version rows) with lineage, on SQLite and PostgreSQL.

Fills a fresh catalog with bulk inserts (``ui_load.fill``, plus lineage: every dataset's versions 50..99 were
written from the same version of the previous dataset, an edge in ``dal_lineage`` and a record in the version's
properties as dal.write stores them), then times, in one run:

- the catalog calls behind each command, server-side (in process, median of N): ``dal ls`` (a page and all
  10,000), ``dal show``, ``dal versions``, ``dal lineage`` (depth 1 and 3), upstream/downstream edges; through
  ``Catalog`` (SQLAlchemy) and ``dal.catalog.lite`` (what the CLI uses);
- the commands themselves as processes (wall and CPU = user + sys, median), beside a minimal click CLI;
- the UI's dataset page and lineage API through the real server (``dal ui``), p50/p95.

    .venv/bin/python benchmarks/catalog_scale.py                         # both backends, 10,000 x 100
    .venv/bin/python benchmarks/catalog_scale.py --datasets 500 --versions 20 --backends sqlite
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ui_load

from dal import lineage
from dal.catalog import Catalog, lite
from dal.catalog.models import LineageRow, VersionRow

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


def name_of(i: int) -> str:
    return f"team{i % 100:02d}.ds_{i:05d}"


def add_lineage(url: str, datasets: int, versions: int) -> float:
    """Versions ``versions//2 ..`` of dataset i were built from the same version of dataset i-1 (i >= 1)."""
    engine = sa.create_engine(url)
    t0 = time.perf_counter()
    first = versions // 2
    with engine.begin() as c:
        edges, updates = [], []
        for i in range(1, datasets):
            for v in range(first, versions):
                vid = i * versions + v + 1
                up = {"dataset": name_of(i - 1), "version": v, "filters": None, "how": "inferred"}
                edges.append({"version_id": vid, "upstream_dataset_id": i, "upstream_name": name_of(i - 1),
                              "upstream_version": v, "filters": None, "how": "inferred"})  # fmt: skip
                updates.append({"vid": vid, "p": {"lineage": {"user": "bench", "time": "2025-01-01T00:00:00+00:00",
                                                              "upstream": [up]}}})  # fmt: skip
                if len(edges) >= ui_load.CHUNK:
                    c.execute(sa.insert(LineageRow.__table__), edges)
                    c.execute(
                        sa.update(VersionRow.__table__)
                        .where(VersionRow.__table__.c.id == sa.bindparam("vid"))
                        .values(properties=sa.bindparam("p")),
                        updates,
                    )
                    edges, updates = [], []
        if edges:
            c.execute(sa.insert(LineageRow.__table__), edges)
            c.execute(
                sa.update(VersionRow.__table__)
                .where(VersionRow.__table__.c.id == sa.bindparam("vid"))
                .values(properties=sa.bindparam("p")),
                updates,
            )
    with engine.begin() as c:
        c.execute(sa.text("ANALYZE"))
    engine.dispose()
    return time.perf_counter() - t0


def ms(fn: Callable[[], Any], n: int) -> float:
    fn()  # warm: connections, statement caches
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def process(args: list[str], env: dict[str, str], n: int) -> tuple[float, float]:
    """Median wall and CPU (user + sys of the child) seconds of a command."""
    walls, cpus = [], []
    for _ in range(n):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(args, env=env, check=True, capture_output=True)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def run(backend: str, datasets: int, versions: int, n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        schema = f"dal_bench_scale_{uuid.uuid4().hex[:8]}"
        if backend == "sqlite":
            url = f"sqlite:///{Path(tmp) / 'catalog.db'}"
        else:
            eng = sa.create_engine(ui_load.PG_URL)
            with eng.begin() as c:
                c.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
            sep = "&" if "?" in ui_load.PG_URL else "?"
            url = f"{ui_load.PG_URL}{sep}options=-csearch_path%3D{schema}"
        try:
            filled = ui_load.fill(url, datasets, versions)
            linked = add_lineage(url, datasets, versions)
            print(f"\n## {backend}: {datasets:,} datasets x {versions} versions = {datasets * versions:,} version rows "
                  f"(filled in {filled:.0f} s, lineage edges in {linked:.0f} s)\n")  # fmt: skip
            middle = datasets // 2
            name, up_name = name_of(middle), name_of(middle - 1)
            mid_v = versions - 1
            cat = Catalog(url)
            quick = lite.connect(url)
            assert quick is not None
            print(f"server-side, in process (median of {n}), ms:\n")
            print(f"| {'call':58} | {'Catalog':>8} | {'lite':>8} |")
            print(f"|{'-' * 60}|{'-' * 10}:|{'-' * 10}:|")
            rows = [
                ("ls: all datasets (list_datasets)", lambda c: c.list_datasets(), True),
                ("ls --limit 50", lambda c: c.list_datasets(limit=50), True),
                ("ls 'team07.*' (glob)", lambda c: c.list_datasets("team07.*"), True),
                ("ls ds_0424 (substring of name or description)", lambda c: c.list_datasets("ds_0424"), True),
                ("show: get_dataset + latest version", lambda c: (c.get_dataset(name), c.version(name)), True),
                ("versions: all of one dataset, with schema and tags", lambda c: c.versions(name), True),
                ("versions --limit 10", lambda c: c.versions(name, limit=10), True),
                ("tags", lambda c: c.tags(name), True),
                ("completion: names starting team07.ds_0", lambda c: c.dataset_names("team07.ds_0"), False),
                ("upstream edges of a version", lambda c: c.upstream(name, mid_v), None),
                ("downstream edges of a version", lambda c: c.downstream(up_name, mid_v), None),
                ("lineage(depth=1) (dal lineage, the UI's section)", lambda c: lineage.lineage(c, name, mid_v), None),
                (
                    "lineage(depth=3)",
                    lambda c: lineage.lineage(c, name_of(datasets // 4), mid_v, depth=3),
                    None,
                ),
            ]
            for label, fn, on_lite in rows:
                full = f"{ms(lambda fn=fn: fn(cat), n):8.1f}" if on_lite is not False else f"{'-':>8}"
                quick_ms = f"{ms(lambda fn=fn: fn(quick), n):8.1f}" if on_lite is not None else f"{'-':>8}"
                print(f"| {label:58} | {full} | {quick_ms} |", flush=True)
            depth3 = lineage.lineage(cat, name_of(datasets // 4), mid_v, depth=3)
            assert depth3["downstream"][0]["downstream"][0]["downstream"], "the benchmark's chain has 3 levels"
            quick.close()
            cat.close()

            env = {**os.environ, "DAL_CATALOG_URL": url, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
            dal = [sys.executable, "-m", "dal.cli"]
            print(f"\ncommands as processes (median of {max(3, n // 4)}): wall s, CPU s (user+sys), CPU vs a minimal "
                  "click CLI in the same run:\n")  # fmt: skip
            k = max(3, n // 4)
            base_wall, base_cpu = process([sys.executable, "-c", MINIMAL_CLICK, "ls"], env, k)
            print(f"| {'command':48} | {'wall s':>7} | {'CPU s':>6} | {'x click':>7} |")
            print(f"|{'-' * 50}|{'-' * 8}:|{'-' * 7}:|{'-' * 8}:|")
            print(f"| {'minimal click CLI (baseline)':48} | {base_wall:7.3f} | {base_cpu:6.3f} | {1:7.1f} |")
            cmds = [
                ("dal --help", ["--help"], {}),
                ("dal ls --limit 50", ["ls", "--limit", "50"], {}),
                ("dal ls --json (the default: first 1,000 by name)", ["ls", "--json"], {}),
                ("dal ls --json --limit 0 (all datasets)", ["ls", "--json", "--limit", "0"], {}),
                ("dal show NAME", ["show", name], {}),
                ("dal versions NAME", ["versions", name], {}),
                ("dal lineage NAME V", ["lineage", name, str(mid_v)], {}),
                ("TAB: dal show team07.ds_0<TAB>", [], {"_DAL_COMPLETE": "bash_complete",
                                                        "COMP_WORDS": "dal show team07.ds_0", "COMP_CWORD": "2"}),
                ("TAB: dal lineage NAME <TAB> (tags)", [], {"_DAL_COMPLETE": "bash_complete",
                                                            "COMP_WORDS": f"dal lineage {name} ", "COMP_CWORD": "3"}),
            ]  # fmt: skip
            for label, args, extra in cmds:
                wall, cpu = process([*dal, *args], {**env, **extra}, k)
                print(f"| {label:48} | {wall:7.3f} | {cpu:6.3f} | {cpu / base_cpu:7.1f} |", flush=True)

            print(f"\nthe UI through its server (dal ui), {n} sequential requests each, ms:\n")
            print(f"| {'endpoint':60} | {'p50':>7} | {'p95':>7} |")
            print(f"|{'-' * 62}|{'-' * 8}:|{'-' * 8}:|")
            with ui_load.server(url) as port:
                for path in (f"/d/{name}", f"/d/{up_name}?v={mid_v}",
                             f"/api/datasets/{name}/versions/{mid_v}/lineage",
                             f"/api/datasets/{name_of(datasets // 4)}/versions/{mid_v}/lineage?depth=3",
                             f"/api/datasets/{name}/versions", "/api/datasets?page=100"):  # fmt: skip
                    p50, p95, _, _ = ui_load.timings(port, path, n)
                    print(f"| {path:60} | {p50:7.1f} | {p95:7.1f} |", flush=True)
        finally:
            if backend == "postgres":
                with eng.begin() as c:
                    c.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
                eng.dispose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", type=int, default=10_000)
    ap.add_argument("--versions", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=20, help="timed calls / requests per row")
    ap.add_argument("--backends", default="sqlite,postgres")
    args = ap.parse_args()
    print(json.dumps({"python": sys.version.split()[0], "cpus": os.cpu_count()}))
    for backend in args.backends.split(","):
        run(backend.strip(), args.datasets, args.versions, args.repeat)


if __name__ == "__main__":
    main()
