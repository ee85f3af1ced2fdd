"""Labels, datasets with a label, and search counts and facets through ``dal serve`` (issue #36): labelling needs
WRITE on the dataset, reading labels READ; ``dal ls --label``, the count and the facets name and count only the
datasets the principal may read. Through the CLI and ``RemoteCatalog`` against a real server process."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from dal.catalog import Catalog
from dal.catalog.auth import NotAuthorized
from dal.catalog.errors import LabelNotFound
from dal.catalog.remote import RemoteCatalog
from dal.cli.app import cli
from tests.serve.conftest import Served


def _dal(served: Served, who: str, *args: str) -> tuple[int, str, str]:
    env = {"DAL_CATALOG_URL": served.url, "DAL_TOKEN": str(served.tokens[who] or "")}
    result = CliRunner().invoke(cli, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def test_dal_label_unlabel_labels_and_ls_label_through_the_server(served: Served) -> None:
    code, out, err = _dal(served, "writer", "label", "weather.wind", "gold", "team=vision")
    assert code == 0, err
    assert "labelled gold, team=vision" in out
    code, out, err = _dal(served, "writer", "label", "weather.wind", "pii", "--column", "v", "--json")
    assert code == 0, err
    assert json.loads(out)["labels"] == {"dataset": ["gold", "team=vision"], "columns": {"v": ["pii"]}}
    direct = Catalog(served.db)
    assert [b.text for b in direct.labels("weather.wind")] == ["gold", "team=vision", "pii"]  # recorded
    code, out, err = _dal(served, "ns_reader", "labels", "weather.wind", "--json")
    assert code == 0 and json.loads(out)["labels"] == {"dataset": ["gold", "team=vision"], "columns": {"v": ["pii"]}}, (
        err
    )
    code, out, err = _dal(served, "ns_reader", "ls", "--label", "gold", "--json")
    assert code == 0 and [d["name"] for d in json.loads(out)] == ["weather.wind"], err
    code, out, err = _dal(served, "writer", "unlabel", "weather.wind", "gold")
    assert code == 0 and "removed label gold" in out, err
    code, out, err = _dal(served, "writer", "unlabel", "weather.wind", "gold")
    assert code == 1 and err.count("\n") == 1 and "label 'gold' on weather.wind not found" in err
    assert [b.text for b in direct.labels("weather.wind")] == ["team=vision", "pii"]
    # labelling needs WRITE: a reader is refused (one line), and nothing changes
    code, out, err = _dal(served, "ns_reader", "label", "weather.wind", "bronze")
    assert code == 1 and err.count("\n") == 1 and "needs WRITE" in err
    assert "bronze" not in {b.text for b in direct.labels("weather.wind")}
    # the audit has the change and the refusal
    from dal.catalog.auth import AuthStore

    audit = AuthStore(served.db).audit(dataset="weather.wind", limit=1000)
    assert any(r.principal == "writer" and r.action == "label" and r.outcome == "allowed" and "pii" in r.detail
               for r in audit)  # fmt: skip
    assert any(r.principal == "ns_reader" and r.action == "label" and r.outcome == "denied" for r in audit)


def test_label_errors_through_the_server_are_the_catalogs_own(served: Served) -> None:
    writer = RemoteCatalog(served.url, str(served.tokens["writer"]))
    with pytest.raises(LabelNotFound) as found:
        writer.unlabel("weather.radar", "nope")
    assert "weather.radar" in str(found.value)
    with pytest.raises(NotAuthorized):  # no WRITE on sales.*: the same refusal whether or not it exists
        writer.label("sales.orders", "gold")
    with pytest.raises(NotAuthorized):
        writer.label("sales.ordres", "gold")
    from dal.catalog.errors import InvalidName

    with pytest.raises(InvalidName, match="no column 'nope'"):
        writer.label("weather.radar", "pii", column="nope")
    assert writer.labels("weather.radar") == Catalog(served.db).labels("weather.radar")


def test_labelled_counts_and_facets_hold_only_readable_datasets(served: Served) -> None:
    direct = Catalog(served.db)
    direct.label("sales.orders", "secret-sales")
    direct.label("sales.orders", "shared")
    direct.label("weather.radar", "shared")
    owner = RemoteCatalog(served.url, str(served.tokens["owner"]))
    reader = RemoteCatalog(served.url, str(served.tokens["ns_reader"]))
    one = RemoteCatalog(served.url, str(served.tokens["one_reader"]))
    nobody = RemoteCatalog(served.url, str(served.tokens["nobody"]))
    assert owner.labelled("shared") == {"sales.orders", "weather.radar"} == direct.labelled("shared")
    assert reader.labelled("shared") == {"weather.radar"} == one.labelled("shared")
    assert reader.labelled("secret-sales") == set() == nobody.labelled("shared")
    assert owner.labelled("shared", ["sales.orders"]) == {"sales.orders"}
    # the count and the facets: the owner's (MANAGE on *) are the catalog's; a reader's only count what it reads
    assert owner.facets() == direct.facets() and owner.count_datasets() == direct.count_datasets()
    mine = reader.facets()
    assert "secret-sales" not in mine["label"] and mine["label"]["shared"] == 1
    weather = [d.name for d, _, _ in direct.search_datasets(None, limit=1000) if d.name.startswith("weather.")]
    assert reader.count_datasets() == len(weather) and sum(mine["format"].values()) == len(weather)
    assert one.count_datasets() == 1 and one.facets()["label"] == {"shared": 1}
    assert nobody.count_datasets() == 0 and nobody.facets() == {"format": {}, "owner": {}, "tag": {}, "label": {}}
    assert owner.count_datasets("orders", {"label": "shared"}) == 1 and reader.count_datasets("orders") == 0
    # the search page itself is of the readable datasets (paged in the database)
    assert [d.name for d, _, _ in reader.search_datasets(None, limit=100)] == weather
    status, raw, _ = served.request("GET", "/api/v1/search/facets?f.nope=x", "ns_reader")
    assert status == 400 and "unknown search facet" in json.loads(raw)["error"]
    assert served.request("GET", "/api/v1/labelled?label=bad%20label", "owner")[0] == 400
