"""``dal.catalog.retry``: which connection failures are refusals for now, the backoff and its budget (no server)."""

from __future__ import annotations

import pytest

from dal.catalog import CatalogError, CatalogUnavailable, retry

REFUSED_FOR_NOW = [
    'connection failed: connection to server at "127.0.0.1", port 5432 failed: FATAL:  sorry, too many clients already',
    'connection to server at "db" (10.0.0.5), port 5432 failed: FATAL:  too many connections for role "train"',
    'FATAL:  too many connections for database "catalog"',
    "FATAL:  remaining connection slots are reserved for non-replication superuser connections",
    "FATAL:  remaining connection slots are reserved for roles with the SUPERUSER attribute",
    "FATAL:  the database system is starting up",
    "FATAL:  the database system is shutting down",
    'connection to server at "127.0.0.1", port 5432 failed: Connection refused\n\tIs the server running on that host',
    "ERROR:  no more connections allowed (max_client_conn)",  # PgBouncer
]
LASTING = [
    'connection failed: connection to server at "127.0.0.1", port 5432 failed: FATAL:  role "nobody" does not exist',
    'FATAL:  database "none" does not exist',
    'FATAL:  password authentication failed for user "train"',
    'FATAL:  no pg_hba.conf entry for host "10.0.0.9", user "train", database "catalog"',
    "failed to resolve host 'db.invalid': [Errno -2] Name or service not known",
    'FATAL:  role "train" is not permitted to log in',
    # libpq tried two addresses: one refused, the other answered that the role does not exist
    'port 5432 failed: Connection refused\nconnection to server at "::1", port 5432 failed: FATAL:  role "x" does not exist',
]


@pytest.mark.parametrize("message", REFUSED_FOR_NOW)
def test_refusals_for_now_are_transient(message: str) -> None:
    assert retry.transient(OSError(message))


@pytest.mark.parametrize("message", LASTING)
def test_what_waiting_cannot_cure_is_not(message: str) -> None:
    assert not retry.transient(OSError(message))


def test_the_budget_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(retry.ENV, raising=False)
    assert retry.budget() == 30
    for raw, seconds in (("0", 0), ("2.5", 2.5), (" 90 ", 90)):
        monkeypatch.setenv(retry.ENV, raw)
        assert retry.budget() == seconds
    for raw in ("abc", "-1", "inf", "nan"):
        monkeypatch.setenv(retry.ENV, raw)
        with pytest.raises(CatalogError, match=retry.ENV):
            retry.budget()


class Clock:
    """time.monotonic and time.sleep of a test: sleeping advances the clock."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(retry.time, "monotonic", fake.monotonic)
    monkeypatch.setattr(retry.time, "sleep", fake.sleep)
    monkeypatch.delenv(retry.ENV, raising=False)
    return fake


class Refusing:
    """A connection attempt refused ``times`` times (with ``error``), then answering "connected"."""

    def __init__(self, times: int, error: str = "FATAL:  sorry, too many clients already") -> None:
        self.times, self.error, self.calls = times, error, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.times:
            raise OSError(self.error)
        return "connected"


def test_a_refusal_for_now_is_retried_with_jittered_doubling_waits(clock: Clock) -> None:
    attempt = Refusing(12)
    assert retry.connect(attempt, "pg://x") == "connected"
    assert attempt.calls == 13 and len(clock.slept) == 12
    ceilings = [min(retry.MAX_DELAY_S, retry.FIRST_DELAY_S * 2**i) for i in range(12)]
    assert all(0 <= s <= c for s, c in zip(clock.slept, ceilings, strict=True))
    assert len(set(clock.slept)) == 12  # random waits, not in step with other processes


def test_a_lasting_refusal_fails_at_the_deadline_and_anything_else_at_once(clock: Clock) -> None:
    attempt = Refusing(10**6)
    with pytest.raises(CatalogUnavailable, match=r"catalog pg://x failed: FATAL:  sorry, too many clients already \(still "
                       r"refused after \d+ attempts in 30\.0 s; DAL_CATALOG_RETRY_S sets how long dal retries\)"):  # fmt: skip
        retry.connect(attempt, "pg://x")
    assert 15 < attempt.calls < 200 and sum(clock.slept) == pytest.approx(30)
    denied = Refusing(1, error='FATAL:  password authentication failed for user "x"')
    with pytest.raises(OSError, match="password authentication failed"):
        retry.connect(denied, "pg://x")
    assert denied.calls == 1 and sum(clock.slept) == pytest.approx(30)  # no wait
    once = Refusing(1)
    with pytest.raises(CatalogUnavailable, match="after 1 attempt in"):
        retry.connect(once, "pg://x", patience=0)  # shell completion never waits
    assert once.calls == 1


def test_a_window_shares_one_deadline_between_the_connections_inside(clock: Clock) -> None:
    with retry.window():
        with pytest.raises(CatalogUnavailable):
            retry.connect(Refusing(10**6), "pg://x")  # the quick reader spends the budget
        spent = clock.now
        later = Refusing(10**6)
        with pytest.raises(CatalogUnavailable, match="after 1 attempt"):
            retry.connect(later, "pg://x")  # then Catalog tries once, not another 30 s
        assert clock.now == spent and later.calls == 1
    assert retry.connect(Refusing(3), "pg://x") == "connected"  # outside: a budget of its own
