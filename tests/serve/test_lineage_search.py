"""Lineage and search through ``dal serve`` show a principal only the datasets it may read: upstream and downstream
edges, the lineage record in a version's properties, ``dal lineage``, and search results."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from click.testing import CliRunner

import dal
from dal.catalog import Catalog
from dal.catalog.auth import NotAuthorized
from dal.catalog.remote import RemoteCatalog
from dal.cli.app import cli
from tests.serve.conftest import Served


@pytest.fixture(scope="module")
def built(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Served:
    """weather.mix v0 from weather.radar v0 and sales.orders v0; sales.report v0 from weather.radar v0."""
    root = tmp_path_factory.mktemp("lineage")
    for name, inputs in (
        ("weather.mix", [("weather.radar", 0), ("sales.orders", 0)]),
        ("sales.report", [("weather.radar", 0)]),
    ):
        dal.write(pa.table({"id": [1]}), name, path=str(root / name), catalog=served.db, inputs=inputs)
    return served


def test_upstream_and_downstream_leave_out_what_the_principal_may_not_read(built: Served) -> None:
    direct = Catalog(built.db)
    assert {e.upstream for e in direct.upstream("weather.mix", 0)} == {"weather.radar", "sales.orders"}
    reader = RemoteCatalog(built.url, str(built.tokens["ns_reader"]))
    assert [e.upstream for e in reader.upstream("weather.mix", 0)] == ["weather.radar"]
    # (earlier tests' reads in this process may add inferred edges: compared with the database's own answer)
    everything = direct.downstream("weather.radar", 0)
    assert {"weather.mix", "sales.report"} <= {e.dataset for e in everything}
    mine = reader.downstream("weather.radar", 0)
    assert mine == [e for e in everything if e.dataset.startswith("weather.")] and "weather.mix" in {
        e.dataset for e in mine
    }
    owner = RemoteCatalog(built.url, str(built.tokens["owner"]))
    assert owner.upstream("weather.mix", 0) == direct.upstream("weather.mix", 0)  # everything, for MANAGE on *
    # the lineage record in the version's properties too: pin, versions
    for v in (reader.version("weather.mix", 0), reader.versions("weather.mix")[0]):
        assert [u["dataset"] for u in v.properties["lineage"]["upstream"]] == ["weather.radar"]
    raw = json.dumps([built.request("GET", p, "ns_reader")[1].decode() for p in (
        "/api/v1/datasets/weather.mix/pin", "/api/v1/datasets/weather.mix/versions",
        "/api/v1/datasets/weather.mix/upstream?version=0", "/api/v1/datasets/weather.radar/downstream?version=0")])  # fmt: skip
    assert "sales" not in raw and "weather.radar" in raw


def test_dal_lineage_through_the_server_names_no_unreadable_dataset(built: Served) -> None:
    env = {"DAL_CATALOG_URL": built.url, "DAL_TOKEN": str(built.tokens["ns_reader"])}
    for name in ("weather.mix", "weather.radar"):
        result = CliRunner().invoke(cli, ["lineage", name, "--json"], env=env)
        assert result.exit_code == 0, result.stderr
        assert "sales" not in result.stdout
    result = CliRunner().invoke(
        cli, ["lineage", "weather.mix", "--json"], env={**env, "DAL_TOKEN": str(built.tokens["owner"])}
    )
    assert "sales.orders" in result.stdout


def test_search_shows_only_readable_datasets(built: Served) -> None:
    reader = RemoteCatalog(built.url, str(built.tokens["ns_reader"]))
    owner = RemoteCatalog(built.url, str(built.tokens["owner"]))
    assert [d.name for d, _, _ in reader.search_datasets("orders")] == []
    assert [d.name for d, _, _ in owner.search_datasets("orders")] == ["sales.orders"]
    direct = Catalog(built.db).search_datasets(None, limit=100)
    readable = [(d.name, r, s) for d, r, s in direct if d.name.startswith("weather.")]
    assert [(d.name, r, s) for d, r, s in reader.search_datasets(None, limit=100)] == readable
    assert [d.name for d, _, _ in reader.search_datasets(None, limit=1, offset=1)] == [readable[1][0]]
    status, raw, _ = built.request("GET", "/api/v1/search?q=radar", "ns_reader")
    assert status == 200 and json.loads(raw)["results"][0]["reasons"] == [["name", None]]
    assert built.request("GET", "/api/v1/search?q=x", None)[0] == 401


def test_labels_through_the_server_need_write_and_ls_label_shows_only_readable_datasets(built: Served) -> None:
    owner = RemoteCatalog(built.url, str(built.tokens["owner"]))
    reader = RemoteCatalog(built.url, str(built.tokens["ns_reader"]))
    writer = RemoteCatalog(built.url, str(built.tokens["writer"]))
    assert [lb.text for lb in writer.label("weather.wind", "gold")] == ["gold"]
    owner.label("sales.orders", "gold")
    try:
        with pytest.raises(NotAuthorized, match="needs WRITE"):
            reader.label("weather.wind", "silver")
        with pytest.raises(NotAuthorized, match="needs WRITE"):
            writer.label("sales.orders", "silver")  # WRITE on weather.* only
        assert owner.labelled("gold") == Catalog(built.db).labelled("gold") == {"weather.wind", "sales.orders"}
        assert reader.labelled("gold") == {"weather.wind"}  # not the name of a dataset it may not read
        assert reader.labelled("gold", ["weather.radar"]) == set()
        env = {"DAL_CATALOG_URL": built.url, "DAL_TOKEN": str(built.tokens["ns_reader"])}
        result = CliRunner().invoke(cli, ["ls", "--label", "gold", "--json"], env=env)
        assert [d["name"] for d in json.loads(result.stdout)] == ["weather.wind"]
        assert built.request("GET", "/api/v1/labelled?label=gold", None)[0] == 401
    finally:
        assert owner.unlabel("weather.wind", "gold") == () and owner.unlabel("sales.orders", "gold") == ()
