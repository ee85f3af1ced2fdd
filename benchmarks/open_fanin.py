"""Many ranks pinning a version at once: ``dal.open`` from N processes against a PostgreSQL role with a connection limit.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/open_fanin.py --processes 8 --threads 4 --opens 25 --limit 5 \\
        [--baseline /path/to/older/checkout] [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]

Creates a schema and a role (``CONNECTION LIMIT --limit``) on the server at ``--url`` (a superuser; default
``$DAL_TEST_PG_URL`` or the test server), writes a small Delta dataset of three versions there, then starts
``--processes`` processes that import dal's reading code and psycopg, wait until all are ready, and call ``dal.open`` ``--opens`` times each
on ``--threads`` threads, as the role. Prints, per checkout (this one, and ``--baseline`` when given: its processes
run with ``PYTHONPATH`` at it), the open latency (p50, p99, max), the failures and their first error, how many
connection attempts the server refused and dal retried (this checkout's ``dal.catalog`` debug lines), whether
every successful open pinned the newest version, and the wall time. The schema and the role are dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import make_url

REPO = Path(__file__).resolve().parents[1]
NAME = "fanin.bench"
OPENER = """
import json, logging, sys, time
from concurrent.futures import ThreadPoolExecutor
import dal
import dal.api  # what dal.open imports (pyarrow, …): before the clock, as in a rank that has its data code loaded
import psycopg  # the driver's import too: the clock measures the catalog round trips

refused = []
class Refusals(logging.Handler):
    def emit(self, record):
        refused.append(record.getMessage())
log = logging.getLogger("dal.catalog")
log.setLevel(logging.DEBUG)
log.addHandler(Refusals())
threads, opens = int(sys.argv[1]), int(sys.argv[2])
print("ready", flush=True)
sys.stdin.readline()

def one(_i):
    t = time.perf_counter()
    try:
        return {"version": dal.open(sys.argv[3]).version.number, "s": time.perf_counter() - t}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {str(e)[-160:]}", "s": time.perf_counter() - t}

with ThreadPoolExecutor(threads) as pool:
    out = list(pool.map(one, range(opens)))
print(json.dumps({"opens": out, "refused": len([m for m in refused if "retrying" in m])}), flush=True)
"""


def fan_in(tree: str, url: str, processes: int, threads: int, opens: int) -> dict[str, object]:
    """One run: every process's opens, timed from the moment all processes were told to start."""
    env = {**os.environ, "PYTHONPATH": tree, "DAL_CATALOG_URL": url, "OPENLINEAGE_DISABLED": "true"}
    command = [sys.executable, "-c", OPENER, str(threads), str(opens), NAME]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with tempfile.TemporaryDirectory() as cwd:  # no dal in the working directory
        children = [subprocess.Popen(command, text=True, env=env, cwd=cwd, **pipes) for _ in range(processes)]
        for child in children:
            assert child.stdout is not None
            line = child.stdout.readline().strip()
            if line != "ready":
                raise SystemExit(f"an opener did not start: {child.communicate()[1]}")
        started = time.perf_counter()
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        reports = []
        for child in children:
            out, err = child.communicate(timeout=600)
            if child.returncode != 0:
                raise SystemExit(f"an opener failed: {err}")
            reports.append(json.loads(out.strip().splitlines()[-1]))
    wall = time.perf_counter() - started
    results = [o for r in reports for o in r["opens"]]
    return {"results": results, "refused": sum(r["refused"] for r in reports), "wall": wall}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--url", default=os.environ.get("DAL_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
    )
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--opens", type=int, default=25, help="per process")
    parser.add_argument("--limit", type=int, default=5, help="the role's CONNECTION LIMIT")
    parser.add_argument("--baseline", default=None, help="another checkout of dal to compare with")
    args = parser.parse_args()
    tag = uuid.uuid4().hex[:10]
    schema, role = f"dal_fanin_{tag}", f"dal_fanin_{tag}"
    admin = sa.create_engine(args.url, poolclass=sa.pool.NullPool)
    with admin.begin() as c:
        c.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        c.execute(sa.text(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT {int(args.limit)}'))
    base = make_url(args.url).update_query_dict({"options": f"-csearch_path={schema}"})
    owner_url = base.render_as_string(hide_password=False)
    role_url = base.set(username=role, password=None).render_as_string(hide_password=False)
    try:
        with tempfile.TemporaryDirectory() as warehouse:
            make = (
                "import dal, pyarrow as pa\n"
                "for i in range(3): dal.write(pa.table({'id': list(range(10 * i, 10 * i + 10))}), "
                f"{NAME!r}, catalog={owner_url!r}, path={warehouse + '/data'!r} if i == 0 else None)\n"
            )
            env = {**os.environ, "PYTHONPATH": str(REPO), "OPENLINEAGE_DISABLED": "true", "DAL_HOME": warehouse}
            subprocess.run([sys.executable, "-c", make], env=env, check=True)
            with admin.begin() as c:
                c.execute(sa.text(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"'))
                c.execute(sa.text(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"'))
            trees = {"this": str(REPO)} | ({"baseline": args.baseline} if args.baseline else {})
            total = args.processes * args.opens
            print(f"{args.processes} processes x {args.threads} threads, {total} opens, role CONNECTION LIMIT "
                  f"{args.limit}, server {make_url(args.url).render_as_string(hide_password=True)}")  # fmt: skip
            for name, tree in trees.items():
                run = fan_in(tree, role_url, args.processes, args.threads, args.opens)
                results = run["results"]
                assert isinstance(results, list)
                seconds = sorted(o["s"] * 1000 for o in results)
                failures = [o["error"] for o in results if "error" in o]
                versions = {o["version"] for o in results if "version" in o}
                p99 = seconds[min(len(seconds) - 1, round(0.99 * (len(seconds) - 1)))]
                print(f"{name:>8}: open p50 {statistics.median(seconds):.0f} ms, p99 {p99:.0f} ms, "
                      f"max {seconds[-1]:.0f} ms; failures {len(failures)}/{len(results)}; retried refusals "
                      f"{run['refused']}; versions pinned {sorted(versions)}; wall {run['wall']:.1f} s")  # fmt: skip
                if failures:
                    print(f"          first failure: {failures[0]}")
    finally:
        with admin.begin() as c:
            c.execute(sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = :r"), {"r": role})
            c.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
            c.execute(sa.text(f'DROP OWNED BY "{role}"'))
            c.execute(sa.text(f'DROP ROLE "{role}"'))
        admin.dispose()


if __name__ == "__main__":
    main()
