"""Writes through ``dal serve``: ``dal.write``, register, sync, tag, rename, drop and gc with
``DAL_CATALOG_URL=http://…`` record in the served catalog (the same catalog the database URL names: one catalog
id, one claim), with the grants checked on the server, the same error classes as the database URL, every change
and refusal audited, and nothing written to storage when the grant is missing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

import dal
from dal.catalog import Catalog, DatasetExists, DatasetNotFound, TagExists, VersionNotFound
from dal.catalog.auth import AuthStore, NotAuthorized
from dal.catalog.remote import RemoteCatalog
from dal.cli.app import cli
from dal.storage import claims
from dal.storage.location import Location
from tests.serve.conftest import Served


def _table(ids: list[int]) -> pa.Table:
    return pa.table({"id": ids, "v": [f"r{i}" for i in ids]})


@pytest.fixture
def as_owner(served: Served, monkeypatch: pytest.MonkeyPatch) -> Served:
    """This test's process works through the server as ``owner`` (MANAGE on *)."""
    monkeypatch.setenv("DAL_CATALOG_URL", served.url)
    monkeypatch.setenv("DAL_TOKEN", str(served.tokens["owner"]))
    return served


def _as(monkeypatch: pytest.MonkeyPatch, served: Served, who: str) -> None:
    monkeypatch.setenv("DAL_TOKEN", str(served.tokens[who]))


def test_write_append_read_through_the_server_is_the_database_urls_catalog(as_owner: Served, tmp_path: Path) -> None:
    v0 = dal.write(_table([1, 2]), "weather.w1", path=str(tmp_path / "w1"), tags=["first"])
    v1 = dal.write(_table([3]), "weather.w1")
    assert (v0.number, v1.number, v0.tags) == (0, 1, ("first",))
    direct = Catalog(as_owner.db)
    assert [v.number for v in direct.versions("weather.w1")] == [0, 1]
    assert direct.get_dataset("weather.w1").owner == "owner"  # the principal that created it
    # one catalog: the claim names the server's catalog id, so the database URL writes there too
    claim = claims.read(Location.of(str(tmp_path / "w1")))
    assert dal.get_catalog().catalog_id == direct.catalog_id
    assert claim is not None and claim.catalog == direct.catalog_id
    dal.write(_table([4]), "weather.w1", catalog=as_owner.db)
    served_rows = dal.open("weather.w1").to_arrow().sort_by("id")
    direct_rows = dal.open("weather.w1", catalog=as_owner.db).to_arrow().sort_by("id")
    assert served_rows.equals(direct_rows) and served_rows.column("id").to_pylist() == [1, 2, 3, 4]
    assert [v.number for v in dal.get_catalog().versions("weather.w1")] == [0, 1, 2]


def test_tag_untag_rename_drop_gc_through_the_server(as_owner: Served, tmp_path: Path) -> None:
    cat = dal.get_catalog()
    for i in range(3):
        dal.write(_table([i]), "weather.t1", path=str(tmp_path / "t1"))
    assert cat.tag("weather.t1", 1, "good").number == 1
    with pytest.raises(TagExists):
        cat.tag("weather.t1", 2, "good")
    assert cat.tag("weather.t1", 2, "good", force=True).number == 2
    with pytest.raises(VersionNotFound):
        cat.tag("weather.t1", 9, "nine")
    cat.untag("weather.t1", "good")
    with pytest.raises(VersionNotFound):
        cat.untag("weather.t1", "good")
    assert Catalog(as_owner.db).tags("weather.t1") == {}
    with pytest.raises(DatasetExists):
        dal.lifecycle.rename("weather.t1", "weather.radar")
    assert dal.lifecycle.rename("weather.t1", "weather.t2").name == "weather.t2"
    result = dal.lifecycle.gc("weather.t2", keep_last=1)
    assert result.expired == (0, 1)
    history = Catalog(as_owner.db).versions("weather.t2")
    assert [v.unavailable is not None for v in history] == [True, True, False]
    assert sorted(dal.open("weather.t2").to_arrow().column("id").to_pylist()) == [0, 1, 2]  # appends
    dropped = dal.lifecycle.drop("weather.t2", purge=True)
    assert dropped.purged and not any((tmp_path / "t1").rglob("*.parquet"))
    with pytest.raises(DatasetNotFound):
        Catalog(as_owner.db).get_dataset("weather.t2")


def test_register_and_sync_through_the_server(as_owner: Served, tmp_path: Path) -> None:
    from deltalake import write_deltalake

    where = str(tmp_path / "ext")
    write_deltalake(where, _table([1, 2]))
    versions = dal.register("weather.ext", where)
    assert [v.number for v in versions] == [0]
    write_deltalake(where, _table([3]), mode="append")
    assert [v.number for v in dal.sync("weather.ext")] == [1]
    assert dal.open("weather.ext").to_arrow().num_rows == 3
    assert Catalog(as_owner.db).version("weather.ext").storage_version == 1


def test_lineage_is_recorded_through_the_server(as_owner: Served, tmp_path: Path) -> None:
    dal.write(_table([1]), "weather.src", path=str(tmp_path / "src"))
    dal.open("weather.src").to_arrow()
    dal.write(_table([2]), "weather.derived", path=str(tmp_path / "derived"), inputs=[("weather.src", 0)])
    edges = Catalog(as_owner.db).upstream("weather.derived", 0)
    assert [(e.upstream, e.upstream_version) for e in edges] == [("weather.src", 0)]
    served_edges = dal.get_catalog().upstream("weather.derived", 0)
    assert served_edges == edges
    assert [(e.dataset, e.version) for e in dal.get_catalog().downstream("weather.src", 0)] == [("weather.derived", 0)]


def test_without_the_grant_nothing_is_written_and_the_refusal_is_audited(
    served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAL_CATALOG_URL", served.url)
    _as(monkeypatch, served, "ns_reader")
    with pytest.raises(NotAuthorized, match="needs WRITE"):
        dal.write(_table([1]), "weather.nope", path=str(tmp_path / "nope"))
    assert not (tmp_path / "nope").exists()  # refused before anything reached storage
    with pytest.raises(NotAuthorized, match="needs WRITE"):
        dal.get_catalog().tag("weather.radar", 0, "mine")
    _as(monkeypatch, served, "writer")  # WRITE on weather.*: writes and tags, but no drop, rename, gc or optimize
    dal.write(_table([1]), "weather.byw", path=str(tmp_path / "byw"))
    dal.get_catalog().tag("weather.byw", 0, "ok")
    for call in (
        lambda: dal.lifecycle.drop("weather.byw", purge=True),
        lambda: dal.lifecycle.rename("weather.byw", "weather.byw2"),
        lambda: dal.lifecycle.gc("weather.byw", keep_last=1),
        lambda: dal.lifecycle.optimize("weather.byw"),
    ):
        with pytest.raises(NotAuthorized, match="needs MANAGE"):
            call()
    assert any((tmp_path / "byw").rglob("*.parquet"))  # the purge deleted nothing
    # a forbidden dataset and a missing one get one answer
    with pytest.raises(NotAuthorized) as forbidden:
        dal.get_catalog().tag("sales.orders", 0, "x")
    with pytest.raises(NotAuthorized) as missing:
        dal.get_catalog().tag("sales.ordres", 0, "x")
    assert str(forbidden.value).replace("orders", "ordres") == str(missing.value)
    rows = AuthStore(served.db).audit(principal="writer")
    assert any(r.action == "write" and r.outcome == "allowed" and r.dataset == "weather.byw" and r.version == 0
               and f"pid={os.getpid()}" in r.client for r in rows)  # fmt: skip
    assert any(r.action == "manage" and r.outcome == "denied" and r.detail == "no MANAGE" for r in rows)  # drop, gc
    assert any(r.action == "rename" and r.outcome == "denied" for r in rows)
    assert any(r.action == "tag" and r.outcome == "allowed" for r in rows)


def test_a_missing_dataset_names_only_readable_close_names(served: Served) -> None:
    client = RemoteCatalog(served.url, str(served.tokens["writer"]))
    with pytest.raises(DatasetNotFound) as e:
        client.tag("weather.radr", 0, "x")
    assert "weather.radar" in str(e.value)
    with pytest.raises(DatasetNotFound) as e:
        client.tag("weather.order", 0, "x")
    assert "sales" not in str(e.value)


def _cli(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_cli_changes_through_the_server(as_owner: Served, tmp_path: Path) -> None:
    dal.write(_table([1]), "weather.c1", path=str(tmp_path / "c1"))
    env = {"DAL_CATALOG_URL": as_owner.url, "DAL_TOKEN": str(as_owner.tokens["owner"])}
    code, out, err = _cli("tag", "weather.c1", "0", "v0", "--json", env=env)
    assert code == 0, err
    assert json.loads(out)["version"] == 0
    assert _cli("untag", "weather.c1", "v0", env=env)[0] == 0
    assert _cli("rename", "weather.c1", "weather.c2", env=env)[0] == 0
    assert _cli("drop", "weather.c2", "--yes", env=env)[0] == 0
    assert "weather.c2" not in {d.name for d in Catalog(as_owner.db).list_datasets()}
    reader = {**env, "DAL_TOKEN": str(as_owner.tokens["ns_reader"])}
    code, _, err = _cli("tag", "weather.radar", "0", "x", env=reader)
    assert code == 1 and err == "dal: error: ns_reader may not tag 'weather.radar': it needs WRITE on it\n"
