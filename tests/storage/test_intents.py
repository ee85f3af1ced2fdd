"""Intent markers (``dal.storage.intents``): written before a write stages anything and removed after it,
refused writes leave nothing behind, and what gc reads from them (claims, liveness, two looks combined)."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pytest

import dal
from dal.catalog import Catalog
from dal.errors import DalError, SchemaMismatch
from dal.storage import intents
from dal.storage.location import Location


def _intent(token: str, *, store_started: float | None, host: str = "elsewhere") -> intents.Intent:
    machine = {"host": host, "boot_id": "b", "pid_ns": "pid:[1]"}
    return intents.Intent(f"{token}{'0' * 20}", "d", token, 1, "1", machine, time.time() - 600, store_started)


def test_a_write_that_cannot_register_its_intent_writes_nothing(sqlite_env: Catalog, tmp_path: Path) -> None:
    where = tmp_path / "t"
    dal.write(pa.table({"id": [1]}), "reg.t", path=str(where))
    (where / intents.DIR).write_text("a file where dal keeps its markers")  # the marker cannot be written
    before = sorted(p.name for p in where.rglob("*"))
    with pytest.raises(DalError, match=r"cannot register this write at .*; nothing was committed"):
        dal.write(pa.table({"id": [2]}), "reg.t")
    assert sorted(p.name for p in where.rglob("*")) == before
    assert [v.number for v in sqlite_env.versions("reg.t")] == [0]


def test_a_refused_first_write_leaves_no_folder_and_a_write_no_marker(sqlite_env: Catalog, tmp_path: Path) -> None:
    where = tmp_path / "new"
    with pytest.raises(SchemaMismatch):
        dal.write(pa.table({"id": [1]}), "first.t", path=str(where), partition_by=["nope"])
    assert not where.exists()
    dal.write(pa.table({"id": [1]}), "first.t", path=str(where))
    assert not (where / intents.DIR).exists() and intents.scan(Location.of(str(where))).live == ()


def test_what_a_live_intent_claims() -> None:
    now = time.time()
    seen = intents.InFlight((_intent("0123456789ab", store_started=now - 100),))
    assert seen.claims("v3-0123456789ab/part-0.parquet", age=10_000)  # its token: whatever the age
    assert seen.claims("part-00000-c000.snappy.parquet", age=50)  # modified after it began
    assert seen.claims("part-00000-c000.snappy.parquet", age=100 + intents.TIME_SLACK_S - 0.5)
    assert not seen.claims("part-00000-c000.snappy.parquet", age=100 + intents.TIME_SLACK_S + 5)
    writer_clock_only = intents.InFlight((_intent("0123456789ab", store_started=None),))  # began 600 s ago
    assert writer_clock_only.claims("x.parquet", age=600 + intents.CLOCK_SLACK_S - 5)
    assert not intents.InFlight().claims("x.parquet", age=0)
    assert intents.InFlight(unreadable=("_dal_intents/x.json",)).claims("x.parquet", age=1e9)


def test_two_looks_combined() -> None:
    a, b = _intent("aaaaaaaaaaaa", store_started=1.0), _intent("bbbbbbbbbbbb", store_started=1.0)
    first = intents.InFlight((a,), expired=((f"{intents.DIR}/{b.write_id}.json", 10),))
    later = intents.InFlight((b,))  # b's marker was refreshed meanwhile: live after all
    both = first | later
    assert sorted(i.token for i in both.live) == ["aaaaaaaaaaaa", "bbbbbbbbbbbb"] and both.expired == ()
    assert first.news(later) and not both.news(first)


def test_token_of_a_write_id() -> None:
    assert intents.token_of("0123456789abcdef0123456789abcdef") == "0123456789ab"
    assert len(intents.token_of("")) == intents.TOKEN_LENGTH  # no id: a random one
    with pytest.raises(ValueError, match="too short"):
        intents.Intent.from_json(b'{"write_id": "x", "token": "ab", "pid": 1, "started": 0}')
