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
import os
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import make_url

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.fanin import create_role, drop_role, fan_in, grant_reads  # noqa: E402

NAME = "fanin.bench"


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
    create_role(args.url, role, args.limit)
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
            grant_reads(args.url, schema, role)
            trees = {"this": str(REPO)} | ({"baseline": args.baseline} if args.baseline else {})
            total = args.processes * args.opens
            print(f"{args.processes} processes x {args.threads} threads, {total} opens, role CONNECTION LIMIT "
                  f"{args.limit}, server {make_url(args.url).render_as_string(hide_password=True)}")  # fmt: skip
            for name, tree in trees.items():
                run = fan_in(tree, role_url, NAME, args.processes, args.threads, args.opens)
                results = run["results"]
                assert isinstance(results, list)
                seconds = sorted(o["s"] * 1000 for o in results)
                failures = [f"{o['error']}: {o['message'][-160:]}" for o in results if "error" in o]
                versions = {o["version"][0] for o in results if "version" in o}
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
        admin.dispose()
        drop_role(args.url, role)


if __name__ == "__main__":
    main()
