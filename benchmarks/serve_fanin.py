"""Many ranks pinning a version at once through ``dal serve`` (issue #36, fan-in): the clients never connect to
the database; the server keeps a small pool of connections to it.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/serve_fanin.py --processes 10 --threads 10 --opens 10 \\
        [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]

Creates a schema on the PostgreSQL server at ``--url`` (a superuser; default ``$DAL_TEST_PG_URL`` or the test
server), writes a small Delta dataset of three versions into a catalog there, creates a service principal with
READ on it and a token, and starts ``dal serve`` on loopback over that catalog (its database connections carry
``application_name=dal_serve_fanin``, so they can be counted). Then ``--processes`` client processes (dal's
reading code imported before the clock, all released at once: ``benchmarks/fanin.py``) call ``dal.open`` on
``--threads`` threads ``--opens`` times each, with ``DAL_CATALOG_URL`` at the server and ``DAL_TOKEN`` the
service token: ``processes x opens`` pins in all. Prints the pin latency (p50, p99, max), the failures and the
first one, whether every pin got the newest version, the wall time, the audit rows the server wrote for the
pins, and the most database connections the server held at once (sampled every 20 ms). The schema is dropped at
the end.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.fanin import fan_in  # noqa: E402

NAME = "fanin.served"
APP = "dal_serve_fanin"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_listening(proc: subprocess.Popen[str], port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"dal serve exited: {proc.communicate()[0]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError("dal serve did not start in 60 s")


class _PeakConnections:
    """The most connections named ``APP`` open at once on the server, sampled every 20 ms on one connection."""

    def __init__(self, admin_url: str) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._engine = sa.create_engine(admin_url, poolclass=sa.pool.NullPool)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _PeakConnections:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._engine.dispose()

    def _run(self) -> None:
        query = sa.text("SELECT count(*) FROM pg_stat_activity WHERE application_name = :a")
        with self._engine.connect() as c:
            while not self._stop.is_set():
                self.peak = max(self.peak, int(c.execute(query, {"a": APP}).scalar_one()))
                c.commit()
                self._stop.wait(0.02)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--url", default=os.environ.get("DAL_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
    )
    parser.add_argument("--processes", type=int, default=10)
    parser.add_argument("--threads", type=int, default=10)
    parser.add_argument("--opens", type=int, default=10, help="per process")
    args = parser.parse_args()
    total = args.processes * args.opens
    print(f"{args.processes} processes x {args.threads} threads, {total} pins through dal serve "
          f"(PostgreSQL {make_url(args.url).render_as_string(hide_password=True)})")  # fmt: skip
    m = measure(args.url, args.processes, args.threads, args.opens)
    print(f"pin p50 {m['p50_ms']:.0f} ms, p99 {m['p99_ms']:.0f} ms, max {m['max_ms']:.0f} ms; "
          f"failures {len(m['failures'])}/{m['pins']}; versions pinned {m['versions']}; wall {m['wall_s']:.1f} s; "
          f"audit pin rows {m['audited']}; server DB connections at most {m['peak_connections']}")  # fmt: skip
    if m["failures"]:
        print(f"first failure: {m['failures'][0]}")


def measure(url: str, processes: int, threads: int, opens: int) -> dict[str, Any]:
    """The fan-in run described above against the PostgreSQL server at ``url`` (a superuser): latencies in ms,
    the failures, the versions pinned, the wall time, the audit's pin rows and the server's peak connections."""
    schema = f"dal_serve_fanin_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(url, poolclass=sa.pool.NullPool)
    with admin.begin() as c:
        c.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    base = make_url(url).update_query_dict({"options": f"-csearch_path={schema}"})
    catalog_url = base.render_as_string(hide_password=False)
    server_url = base.update_query_dict({"application_name": APP}).render_as_string(hide_password=False)
    proc: subprocess.Popen[str] | None = None
    try:
        with tempfile.TemporaryDirectory() as warehouse:
            env = {**os.environ, "PYTHONPATH": str(REPO), "OPENLINEAGE_DISABLED": "true", "DAL_HOME": warehouse}
            make = (
                "import dal, pyarrow as pa\n"
                "from datetime import timedelta\n"
                "from dal.catalog.auth import AuthStore\n"
                "for i in range(3): dal.write(pa.table({'id': list(range(10 * i, 10 * i + 10))}), "
                f"{NAME!r}, catalog={catalog_url!r}, path={warehouse + '/data'!r} if i == 0 else None)\n"
                f"store = AuthStore({catalog_url!r})\n"
                "store.create_principal('trainer', 'service')\n"
                "store.grant('trainer', 'READ', 'fanin.*')\n"
                "print(store.create_token('trainer', expires_in=timedelta(hours=1))[0])\n"
            )
            made = subprocess.run([sys.executable, "-c", make], env=env, check=True, capture_output=True, text=True)
            token = made.stdout.strip().splitlines()[-1]
            port = _free_port()
            proc = subprocess.Popen(
                [sys.executable, "-m", "dal.cli", "--catalog", server_url, "serve", "--port", str(port)],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            )  # fmt: skip
            _wait_listening(proc, port)
            old = os.environ.get("DAL_TOKEN")
            os.environ["DAL_TOKEN"] = token  # the clients' token (fan_in passes the environment on)
            try:
                with _PeakConnections(url) as peak:
                    run = fan_in(str(REPO), f"http://127.0.0.1:{port}", NAME, processes, threads, opens)
            finally:
                if old is None:
                    os.environ.pop("DAL_TOKEN", None)
                else:
                    os.environ["DAL_TOKEN"] = old
            results = run["results"]
            assert isinstance(results, list)
            ms = sorted(o["s"] * 1000 for o in results)
            catalog = sa.create_engine(catalog_url, poolclass=sa.pool.NullPool)  # its search_path: the schema
            with catalog.connect() as c:
                audited = c.execute(
                    sa.text("SELECT count(*) FROM dal_audit WHERE action = :a"), {"a": "pin"}
                ).scalar_one()
            catalog.dispose()
            return {
                "pins": len(results),
                "p50_ms": statistics.median(ms),
                "p99_ms": ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))],
                "max_ms": ms[-1],
                "failures": [f"{o['error']}: {o['message'][-160:]}" for o in results if "error" in o],
                "versions": sorted({o["version"][0] for o in results if "version" in o}),
                "wall_s": run["wall"],
                "audited": int(audited),
                "peak_connections": peak.peak,
            }
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        with admin.begin() as c:
            c.execute(sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = :a"),
                      {"a": APP})  # fmt: skip
            c.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


if __name__ == "__main__":
    main()
