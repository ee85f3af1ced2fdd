"""One table, one catalog: the two-catalog matrix.

Catalog A writes a dataset (version 0, then an overwrite as version 1, so version 0's files are pinned by version
0 alone). A second handle B then acts on the same location in one of four relations to A — the same catalog
reached by another URL, a typo'd URL (another database), a team migration (A on SQLite, B on PostgreSQL) and a
read-only registration — with every operation that writes or deletes. Afterwards: no file any of A's versions
pins is gone, A's latest holds only A's rows, every refusal is one line naming A's catalog, and A can still
write.

"legacy" B entries (a writable registration of a location another catalog claims, as catalogs recorded before
claims existed, or after the claim moved away) are made by registering read-only and then clearing the mark.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import dal
from dal import errors
from dal.catalog.engine import display_url
from dal.ops import lifecycle
from dal.ops.claim import claim
from dal.storage import claims
from tests.conftest import PG_URL

SCHEMA = dal.TensorSchema("S", [dal.TensorField("id", __import__("numpy").int64, (), dal.ScalarCodec())])
NAME = "team.table"
RELATIONS = ["same", "typo", "migration", "readonly"]
OPS = ["write", "register", "sync", "gc", "optimize", "purge", "drop", "rename"]


def _rows(ids: list[int]) -> pd.DataFrame:
    return pd.DataFrame({"id": ids})


def _write(ids: list[int], url: str, fmt: str, mode: str = "append", name: str = NAME) -> Any:
    extra = {"schema": SCHEMA} if fmt == "petastorm" else {}
    return dal.write(_rows(ids), name, format=fmt, mode=mode, catalog=url, **extra)


def _pinned(url: str, fmt: str) -> dict[str, int]:
    """Every file A's unexpired versions pin, and whether it exists (1) or not (0)."""
    from dal.formats.registry import get_format

    cat = dal.get_catalog(url)
    info = cat.get_dataset(NAME) if NAME in [d.name for d in cat.list_datasets()] else None
    if info is None:
        return {}
    out = {}
    for v in cat.versions(info.name):
        if v.unavailable is not None:
            continue
        for f in get_format(fmt).files(info.location, v, {}):
            path = f.uri.removeprefix("file://")
            out[path] = int(os.path.exists(path))
    return out


def _b_url(relation: str, a_url: str, backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if relation == "same":  # another URL of the same database
        if backend == "sqlite":
            return a_url.replace(str(tmp_path), f"{tmp_path}/x/..")
        return a_url + "&application_name=dal-b"
    if relation == "migration" or backend == "postgres":
        return str(request.getfixturevalue("second_pg_url"))
    return f"sqlite:///{tmp_path}/catlog.db"  # the typo


@pytest.fixture(autouse=True)
def _close_catalogs() -> Iterator[None]:
    """Each test opens catalogs by URL (dal caches one per URL): closed after it, so PostgreSQL's connections
    and the schemas the fixtures drop are released."""
    yield
    for cat in dal.api._catalogs.values():
        cat.close()
    dal.api._catalogs.clear()
    for reader in dal.api._readers.values():
        if reader is not None:
            reader.close()
    dal.api._readers.clear()


def _legacy(b: str, location: str, fmt: str) -> None:
    """B records the location writable without owning it (as before claims, or after the claim moved)."""
    dal.register(NAME, location, format=fmt, catalog=b, read_only=True)
    dal.get_catalog(b).update_dataset(NAME, properties={claims.READ_ONLY: None})


def _op(op: str, b: str, fmt: str, location: str) -> Callable[[], object]:
    return {
        "write": lambda: _write([7], b, fmt),
        "register": lambda: dal.register("other.name", location, format=fmt, catalog=b),
        "sync": lambda: dal.sync(NAME, catalog=b),
        "gc": lambda: lifecycle.gc(NAME, keep_last=1, safe_age=lifecycle.timedelta(0), catalog=b),
        "optimize": lambda: lifecycle.optimize(NAME, catalog=b),
        "purge": lambda: lifecycle.drop(NAME, purge=True, force=True, catalog=b),
        "drop": lambda: lifecycle.drop(NAME, catalog=b),
        "rename": lambda: lifecycle.rename(NAME, "team.renamed", catalog=b),
    }[op]


# what B may do: None = allowed; else the error it must get
def _expected(relation: str, op: str) -> type[Exception] | None:
    if relation == "same":
        return errors.DatasetExists if op == "register" else None
    if relation == "readonly":  # (a second, writable registration of the location is another catalog's claim)
        if op == "register":
            return errors.ClaimedElsewhere
        return errors.ReadOnlyDataset if op in ("write", "gc", "optimize", "purge") else None
    # typo / migration: B records the location too (legacy) but does not own it
    return errors.ClaimedElsewhere if op in ("write", "register", "sync", "gc", "optimize", "purge") else None


CASES = [
    pytest.param(
        backend,
        relation,
        op,
        fmt,
        marks=[pytest.mark.postgres] if backend == "postgres" or relation == "migration" else [],
        id=f"{backend}-{relation}-{op}-{fmt}",
    )
    for backend in ("sqlite", "postgres")
    for relation in RELATIONS
    for op in OPS
    for fmt in ("delta", "petastorm")
    if not (relation == "migration" and backend == "postgres")  # a migration goes from SQLite to PostgreSQL
]


@pytest.mark.parametrize(("backend", "relation", "op", "fmt"), CASES)
def test_two_catalogs_over_one_location(
    backend: str, relation: str, op: str, fmt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    monkeypatch.setenv("DAL_WAREHOUSE", str(tmp_path / "wh"))
    a = str(request.getfixturevalue("pg_url")) if backend == "postgres" else f"sqlite:///{tmp_path}/catalog.db"
    b = _b_url(relation, a, backend, tmp_path, request)
    _write([1, 2, 3], a, fmt)
    _write([4, 5], a, fmt, mode="overwrite")  # version 0's files are pinned by version 0 alone
    location = dal.get_catalog(a).get_dataset(NAME).location
    if relation in ("typo", "migration") and op != "register":
        _legacy(b, location, fmt)
    elif relation == "readonly":
        dal.register(NAME, location, format=fmt, catalog=b, read_only=True)
    before = _pinned(a, fmt)
    assert before and all(before.values())

    expected = _expected(relation, op)
    if expected is None:
        _op(op, b, fmt, location)()
    else:
        with pytest.raises(expected) as err:
            _op(op, b, fmt, location)()
        message = str(err.value)
        assert "\n" not in message
        if expected is errors.ClaimedElsewhere:
            assert display_url(a) in message and "--take-over" in message
    if relation == "same":
        return  # one catalog: its own gc, purge and overwrite rules apply (tested elsewhere)

    # A lost nothing: every file its versions pin is there, every version reads, and its newest holds its rows
    assert _pinned(a, fmt) == before
    cat_a = dal.get_catalog(a)
    assert [v.number for v in cat_a.versions(NAME)] == [0, 1]
    assert sorted(dal.open(NAME, 0, catalog=a).to_pandas()["id"]) == [1, 2, 3]
    assert sorted(dal.open(NAME, catalog=a).to_pandas()["id"]) == [4, 5]
    assert dal.sync(NAME, catalog=a) == []  # B committed nothing A would now record
    assert claims.read(claims.Location.of(location)).catalog == cat_a.catalog_id  # type: ignore[union-attr]
    v = _write([6], a, fmt)  # and A still writes there
    assert v.number == 2 and claims.FOREIGN not in v.properties


@pytest.mark.parametrize("fmt", ["delta", "petastorm"])
def test_the_issue_reproduction_a_typo_d_url_cannot_adopt_write_or_gc(
    fmt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One typo in DAL_CATALOG_URL (same warehouse): the stray catalog's write is refused, naming the real one, and
    the real catalog's version 0 stays readable."""
    from click.testing import CliRunner

    from dal.cli.app import cli

    monkeypatch.setenv("DAL_WAREHOUSE", str(tmp_path / "wh"))
    real, stray = f"sqlite:///{tmp_path}/catalog.db", f"sqlite:///{tmp_path}/catlog.db"
    _write([1, 2, 3], real, fmt)
    with pytest.raises(errors.ClaimedElsewhere, match="belongs to another catalog sqlite:///"):
        _write([9], stray, fmt, mode="overwrite")
    assert dal.get_catalog(stray).list_datasets() == []  # nothing adopted
    result = CliRunner().invoke(cli, ["--catalog", stray, "gc", NAME, "--keep-last", "1"])
    assert result.exit_code != 0
    where = ["--format", fmt]
    result = CliRunner().invoke(cli, ["--catalog", stray, "register", NAME, str(tmp_path / "wh" / NAME), *where])
    assert result.exit_code != 0 and len(result.output.strip().splitlines()) == 1
    assert "belongs to another catalog" in result.output and "--read-only" in result.output
    result = CliRunner().invoke(
        cli, ["--catalog", stray, "register", NAME, str(tmp_path / "wh" / NAME), *where, "--read-only"]
    )
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(cli, ["--catalog", stray, "gc", NAME, "--keep-last", "1"])
    assert result.exit_code != 0 and "read-only" in result.output
    _write([7, 8], real, fmt)
    assert sorted(dal.open(NAME, 0, catalog=real).to_pandas()["id"]) == [1, 2, 3]
    assert sorted(dal.open(NAME, catalog=real).to_pandas()["id"]) == [1, 2, 3, 7, 8]
    # the read-only registration sees the real catalog's new version, recorded plainly
    new = dal.sync(NAME, catalog=stray)
    assert [v.number for v in new] == [1] and sorted(dal.open(NAME, catalog=stray).to_pandas()["id"]) == [1, 2, 3, 7, 8]


def test_a_take_over_moves_the_claim_and_the_old_catalog_can_only_read(tmp_path: Path, pg_url: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The team migration: SQLite records the table; PostgreSQL registers it read-only, takes the claim over
    (logged in the claim's history); from then on PostgreSQL writes and gc's, SQLite only reads."""
    monkeypatch.setenv("DAL_WAREHOUSE", str(tmp_path / "wh"))
    old = f"sqlite:///{tmp_path}/catalog.db"
    _write([1], old, "delta")
    location = dal.get_catalog(old).get_dataset(NAME).location
    dal.register(NAME, location, catalog=pg_url, read_only=True)
    moved = claim(NAME, take_over=True, reason="team migration", catalog=pg_url)
    assert moved.ours and not moved.read_only and moved.history[-1]["reason"] == "team migration"
    assert moved.history[-1]["from"] == display_url(old)
    assert claim(NAME, catalog=old).ours is False
    v = _write([2], pg_url, "delta")
    assert v.number == 1 and claims.FOREIGN not in v.properties
    with pytest.raises(errors.ClaimedElsewhere):
        _write([3], old, "delta")
    with pytest.raises(errors.ClaimedElsewhere):
        lifecycle.gc(NAME, keep_last=1, catalog=old)
    # the old catalog's sync is refused too: the location is not its own any more
    with pytest.raises(errors.ClaimedElsewhere):
        dal.sync(NAME, catalog=old)
    assert sorted(dal.open(NAME, 0, catalog=old).to_pandas()["id"]) == [1]


def _with_a_foreign_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Catalog A writes version 0; catalog B registers read-only, takes the claim over and appends; the claim
    comes back to A, which has not recorded B's commit yet. Returns A's URL."""
    monkeypatch.setenv("DAL_WAREHOUSE", str(tmp_path / "wh"))
    a, b = f"sqlite:///{tmp_path}/a.db", f"sqlite:///{tmp_path}/b.db"
    _write([1], a, "delta")
    location = dal.get_catalog(a).get_dataset(NAME).location
    dal.register(NAME, location, catalog=b, read_only=True)
    claim(NAME, take_over=True, catalog=b)
    _write([2], b, "delta")  # B's commit
    claim(NAME, take_over=True, catalog=a)  # the claim comes back to A
    return a


def test_sync_marks_commits_another_catalog_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit another catalog's dal wrote (before claims, or while the claim was elsewhere) is recorded, marked
    foreign, with a warning: a reader of "latest" can see nobody in this catalog wrote it."""
    a = _with_a_foreign_commit(tmp_path, monkeypatch)
    recorded = dal.sync(NAME, catalog=a)
    assert [v.number for v in recorded] == [1]
    assert recorded[0].properties.get(claims.FOREIGN) is True
    mine = _write([3], a, "delta")
    assert claims.FOREIGN not in mine.properties


def test_a_failed_first_write_leaves_no_claim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAL_WAREHOUSE", str(tmp_path / "wh"))
    url = f"sqlite:///{tmp_path}/catalog.db"
    with pytest.raises(errors.DalError):
        dal.write(pd.DataFrame({"id": [1], "x": [object()]}), NAME, catalog=url)
    assert not (tmp_path / "wh" / NAME).exists()
    # another catalog can write it afterwards
    _write([1], f"sqlite:///{tmp_path}/other.db", "delta")


def test_a_corrupt_or_linked_claim_file_is_refused_not_overwritten(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv("DAL_WAREHOUSE", str(tmp_path / "wh"))
    url = f"sqlite:///{tmp_path}/catalog.db"
    _write([1], url, "delta")
    path = tmp_path / "wh" / NAME / claims.FILE
    for bad in (b"[]", b'"x"', b"[" * 100_000, b'{"format": 1, "catalog": 1}', b"x" * 100_000):
        path.write_bytes(bad)
        with pytest.raises(errors.FormatError, match="not a claim dal can read"):
            _write([2], url, "delta")
        assert path.read_bytes() == bad
    path.unlink()
    target = tmp_path / "elsewhere.json"
    target.write_bytes(b"{}")
    path.symlink_to(target)
    with pytest.raises(errors.FormatError, match="link"):
        lifecycle.gc(NAME, keep_last=1, catalog=url)
    assert target.read_bytes() == b"{}"


def test_same_database_through_two_urls_is_one_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAL_WAREHOUSE", str(tmp_path / "wh"))
    a = f"sqlite:///{tmp_path}/catalog.db"
    b = f"sqlite:///{tmp_path}/x/../catalog.db"
    (tmp_path / "x").mkdir()
    _write([1], a, "delta")
    assert dal.get_catalog(a).catalog_id == dal.get_catalog(b).catalog_id
    assert _write([2], b, "delta").number == 1


def test_the_pg_url_in_a_refusal_is_masked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAL_WAREHOUSE", str(tmp_path / "wh"))
    loc = claims.Location.of(str(tmp_path / "wh" / NAME))
    os.makedirs(loc.path())
    claims.check(loc, claims.Holder("other-id", display_url(PG_URL.replace("postgres@", "postgres:s3cret@")), "x"),
                 "write", recorded=False)  # fmt: skip
    with pytest.raises(errors.ClaimedElsewhere) as err:
        _write([1], f"sqlite:///{tmp_path}/catalog.db", "delta")
    assert "s3cret" not in str(err.value) and "belongs to another catalog postgresql" in str(err.value)


def _ui_page(url: str) -> str:
    """The dataset page of ``NAME`` as the UI app renders it (in process, as in tests/hostile/test_ui_paths.py)."""
    from dal.ui.app import create_app
    from tests.hostile.test_ui_paths import get

    status, _headers, body, _took = get(create_app(dal.get_catalog(url)), f"/d/{NAME}")
    assert status == 200
    return body.decode()


def test_versions_and_the_ui_say_which_versions_are_foreign(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from dal.cli.app import cli

    a = _with_a_foreign_commit(tmp_path, monkeypatch)
    dal.sync(NAME, catalog=a)
    result = CliRunner().invoke(cli, ["--catalog", a, "versions", NAME, "-o", "table"])
    assert result.exit_code == 0, result.output
    rows = [ln for ln in result.output.splitlines() if " create " in ln or " append " in ln]
    assert len(rows) == 2 and "(foreign)" not in rows[0] and "append (foreign)" in rows[1], result.output
    page = _ui_page(a)
    assert page.count(">foreign</span>") == 1
