"""Many processes calling ``dal.open`` at once against a PostgreSQL role with a connection limit: the opener
processes and the role's set-up, shared by ``benchmarks/open_fanin.py`` and ``tests/catalog/test_many_openers.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import sqlalchemy as sa

# one opener process: imports first, "ready", waits for a line on stdin (every process starts at once), then
# ``opens`` opens of argv[3] on ``threads`` threads; prints each open's pinned version (number, storage version,
# rows) or error, its seconds, and how many refusals dal's catalog waited out ("retrying" debug lines)
OPENER = """
import json, logging, sys, time
from concurrent.futures import ThreadPoolExecutor
import dal
import dal.api  # what dal.open imports (pyarrow, …): before the clock, as in a rank that has its data code loaded
try:
    import psycopg  # the driver's import too: the clock measures the catalog round trips
except ImportError:
    pass

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
        v = dal.open(sys.argv[3]).version
        return {"version": [v.number, v.storage_version, v.row_count], "s": time.perf_counter() - t}
    except Exception as e:
        return {"error": type(e).__name__, "message": str(e)[:400], "s": time.perf_counter() - t}

with ThreadPoolExecutor(threads) as pool:
    out = list(pool.map(one, range(opens)))
print(json.dumps({"opens": out, "refused": len([m for m in refused if "retrying" in m])}), flush=True)
"""


def fan_in(
    tree: str, url: str, name: str, processes: int, threads: int, opens: int, timeout: float = 600
) -> dict[str, Any]:
    """``processes`` openers of ``name`` with ``PYTHONPATH`` at ``tree`` and the catalog at ``url``, started at
    once: every open (``results``), the refusals waited out, and the wall time from the start signal."""
    env = {**os.environ, "PYTHONPATH": tree, "DAL_CATALOG_URL": url, "OPENLINEAGE_DISABLED": "true"}
    command = [sys.executable, "-c", OPENER, str(threads), str(opens), name]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with tempfile.TemporaryDirectory() as cwd:  # no dal in the working directory
        children = [subprocess.Popen(command, text=True, env=env, cwd=cwd, **pipes) for _ in range(processes)]
        try:
            for child in children:
                assert child.stdout is not None
                if child.stdout.readline().strip() != "ready":
                    raise RuntimeError(f"an opener did not start: {child.communicate()[1]}")
            started = time.perf_counter()
            for child in children:
                assert child.stdin is not None
                child.stdin.write("go\n")
                child.stdin.flush()
            reports = []
            for child in children:
                out, err = child.communicate(timeout=timeout)
                if child.returncode != 0:
                    raise RuntimeError(f"an opener failed: {err}")
                reports.append(json.loads(out.strip().splitlines()[-1]))
        finally:
            for child in children:
                if child.poll() is None:
                    child.kill()
    wall = time.perf_counter() - started
    results = [o for r in reports for o in r["opens"]]
    return {"results": results, "refused": sum(r["refused"] for r in reports), "wall": wall}


def create_role(admin_url: str, role: str, limit: int) -> None:
    """A login role that may hold at most ``limit`` connections."""
    admin = sa.create_engine(admin_url, poolclass=sa.pool.NullPool)
    with admin.begin() as c:
        c.execute(sa.text(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT {int(limit)}'))
    admin.dispose()


def grant_reads(admin_url: str, schema: str, role: str) -> None:
    """``role`` may read every table of ``schema``."""
    admin = sa.create_engine(admin_url, poolclass=sa.pool.NullPool)
    with admin.begin() as c:
        c.execute(sa.text(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"'))
        c.execute(sa.text(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"'))
    admin.dispose()


def drop_role(admin_url: str, role: str) -> None:
    """Its connections ended, what it owns and the role dropped."""
    admin = sa.create_engine(admin_url, poolclass=sa.pool.NullPool)
    with admin.begin() as c:
        c.execute(sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = :r"), {"r": role})
        c.execute(sa.text(f'DROP OWNED BY "{role}"'))
        c.execute(sa.text(f'DROP ROLE "{role}"'))
    admin.dispose()
