"""Fan-in through ``dal serve`` (issue #36): many processes and threads pin at once against a server on
PostgreSQL; every pin succeeds, is audited, and the server's database connections stay bounded by its pool
whatever the number of clients (the clients never connect to the database). The 1,000-pin figure is
``benchmarks/serve_fanin.py``'s, in docs/BENCHMARKS.md; this runs the same code smaller."""

from __future__ import annotations

import pytest

from benchmarks.serve_fanin import measure

pytestmark = pytest.mark.postgres


def test_every_pin_of_many_clients_succeeds_and_is_audited(pg_server: str) -> None:
    m = measure(pg_server, processes=4, threads=8, opens=40)  # 160 pins, 32 at once
    assert m["failures"] == [] and m["pins"] == 160
    assert m["versions"] == [2]  # each pinned the newest version
    assert m["audited"] == 160
    assert 0 < m["peak_connections"] <= 30  # the server's two pools (catalog, auth): 5 kept + 10 overflow each
