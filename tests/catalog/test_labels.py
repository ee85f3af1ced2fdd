"""Labels of datasets and columns (``pii``, ``gold``, ``owner-team=vision``), on SQLite and PostgreSQL: one value
per key, validated before anything is stored, read back alike by ``Catalog`` and the lite reader, found by search
(with the reason) and the label facet, gone with the dataset, kept through a rename; migration 0006 on a catalog
of revision 0005 keeps its datasets."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from dal.catalog import Catalog, Field, InvalidName, Schema, VersionDraft, lite, migrate
from dal.catalog.engine import make_engine
from dal.catalog.errors import CatalogError, DatasetNotFound, LabelNotFound
from dal.catalog.types import MAX_LABELS, Label, labels_dict, labels_from_dict, parse_label
from dal.errors import DalError

SCHEMA = Schema((Field("id", "int64", False), Field("email", "string"), Field("img", "binary")))


def _catalog(url: str) -> Catalog:
    cat = Catalog(url)
    cat.create_dataset("crm.users", format="delta", location="/data/crm/users", description="customers")
    cat.publish("crm.users", VersionDraft("create", SCHEMA, 3))
    cat.create_dataset("crm.empty", format="delta", location="/data/crm/empty")
    return cat


def test_labels_on_datasets_and_columns(catalog_url: str) -> None:
    cat = _catalog(catalog_url)
    cat.label("crm.users", "gold")
    cat.label("crm.users", "owner-team=vision")
    cat.label("crm.users", "pii", column="email")
    found = cat.label("crm.users", "owner-team=audio")  # one value per key: replaced
    assert found == (
        Label(None, "gold"),
        Label(None, "owner-team", "audio"),
        Label("email", "pii"),
    )
    assert cat.labels("crm.users") == found and cat.labels("crm.empty") == ()
    assert labels_dict(found) == {"dataset": ["gold", "owner-team=audio"], "columns": {"email": ["pii"]}}
    assert labels_from_dict(labels_dict(found)) == found
    # a dataset label and a column label of one key are two labels; pii on the dataset too
    cat.label("crm.users", "pii")
    assert cat.labelled("pii") == {"crm.users"} and cat.labelled("owner-team=vision") == set()
    assert cat.labelled("owner-team=audio", ["crm.empty"]) == set()
    quick = lite.connect(catalog_url)
    assert quick is not None
    try:
        assert quick.labels("crm.users") == cat.labels("crm.users")
        assert quick.labels("crm.empty") == ()
    finally:
        quick.close()
    # removing: by key (any value), or key=value only with that value; the column's pii stays
    with pytest.raises(LabelNotFound, match=r"label 'owner-team=vision' on crm.users not found"):
        cat.unlabel("crm.users", "owner-team=vision")
    assert Label(None, "owner-team", "audio") not in cat.unlabel("crm.users", "owner-team")
    assert cat.unlabel("crm.users", "pii") == (Label(None, "gold"), Label("email", "pii"))
    with pytest.raises(LabelNotFound, match=r"did you mean 'gold'\?"):
        cat.unlabel("crm.users", "golden")
    assert cat.unlabel("crm.users", "pii", column="email") == (Label(None, "gold"),)


def test_labels_follow_the_dataset(catalog_url: str) -> None:
    cat = _catalog(catalog_url)
    cat.label("crm.users", "gold")
    cat.rename_dataset("crm.users", "crm.customers")
    assert cat.labels("crm.customers") == (Label(None, "gold"),)
    cat.delete_dataset("crm.customers")
    cat.create_dataset("crm.customers", format="delta", location="/data/crm/users2")
    assert cat.labels("crm.customers") == ()  # a new dataset of that name has none of the old one's
    engine = make_engine(catalog_url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM dal_labels")).scalar() == 0
    engine.dispose()


@pytest.mark.parametrize(
    "label",
    ["", "has space", "-lead", "a=", "a=b c", "key=va\nlue", "ünï", "<b>", "x" * 64, "k=" + "v" * 201, "a'b", None, 3],
)
def test_malformed_labels_are_refused_before_anything_is_stored(catalog_url: str, label: object) -> None:
    cat = _catalog(catalog_url)
    with pytest.raises(InvalidName, match="invalid label"):
        cat.label("crm.users", label)  # type: ignore[arg-type]
    with pytest.raises(InvalidName):
        parse_label(label)
    assert cat.labels("crm.users") == ()


def test_refusals_are_dal_errors(catalog_url: str) -> None:
    cat = _catalog(catalog_url)
    with pytest.raises(InvalidName, match=r"crm.users has no column 'mail' in its newest version \(its columns "):
        cat.label("crm.users", "pii", column="mail")
    with pytest.raises(InvalidName, match="it has no version yet"):
        cat.label("crm.empty", "pii", column="email")
    with pytest.raises(DatasetNotFound):
        cat.label("crm.nobody", "pii")
    with pytest.raises(LabelNotFound, match="it has no labels"):
        cat.unlabel("crm.users", "pii")
    for i in range(MAX_LABELS):
        cat.label("crm.users", f"k{i}")
    with pytest.raises(CatalogError, match=f"has {MAX_LABELS} labels already"):
        cat.label("crm.users", "one-more")
    cat.label("crm.users", "k0=replaced")  # replacing one is no new label
    assert issubclass(LabelNotFound, DalError)


def test_search_finds_labels_and_says_why(catalog_url: str) -> None:
    cat = _catalog(catalog_url)
    cat.create_dataset("crm.events", format="delta", location="/data/crm/events")
    cat.label("crm.users", "pii", column="email")
    cat.label("crm.users", "gold")
    cat.label("crm.events", "gold")
    cat.label("crm.events", "owner-team=vision")
    assert [d.name for d, _, _ in cat.search_datasets("VISION")] == ["crm.events"]
    assert cat.match_reasons("pii", ["crm.users"]) == {"crm.users": [("label", "pii (column email)")]}
    assert cat.match_reasons("owner-team", ["crm.events"]) == {"crm.events": [("label", "owner-team=vision")]}
    assert [d.name for d, _, _ in cat.search_datasets(filters={"label": "gold"})] == ["crm.events", "crm.users"]
    assert [d.name for d, _, _ in cat.search_datasets(filters={"label": "pii"})] == ["crm.users"]  # a column's
    assert cat.count_datasets(filters={"label": "owner-team"}) == 0  # a facet is the exact label
    facets = cat.facets(filters={"label": "pii"})
    assert facets["label"] == {"gold": 2, "owner-team=vision": 1, "pii": 1}  # the label facet itself unfiltered
    assert cat.facets("events")["label"] == {"gold": 1, "owner-team=vision": 1}


def test_upgrade_from_0005_adds_the_table_and_keeps_the_datasets(catalog_url: str) -> None:
    from alembic import command

    Catalog(catalog_url).close()
    engine = make_engine(catalog_url)
    with engine.begin() as conn:
        command.downgrade(migrate._config(conn), "0005")
    with engine.begin() as conn:
        assert "dal_labels" not in sa.inspect(conn).get_table_names()
        conn.execute(
            sa.text(
                "INSERT INTO dal_datasets (name, format, location, description, owner, current_version, properties, "
                "created_at, updated_at) VALUES ('old.ds', 'delta', '/data/old', '', 'me', -1, '{}', :t, :t)"
            ),
            {"t": "2026-01-01 00:00:00"},
        )
    engine.dispose()
    assert Catalog(catalog_url, create=False).upgrade() == ("0005", migrate.HEAD) == ("0005", "0006")
    cat = Catalog(catalog_url)
    assert cat.labels("old.ds") == ()
    cat.label("old.ds", "legacy")
    assert cat.labelled("legacy") == {"old.ds"}


def test_search_counts_and_facets_within_grant_targets(catalog_url: str) -> None:
    """``within`` (what ``dal serve`` passes: the targets of a principal's grants) keeps the datasets a grant on one
    of them covers, as ``dal.catalog.auth.matches`` decides: a namespace is a prefix up to its dot, never a LIKE."""
    from dal.catalog.auth import Grant, allows

    cat = Catalog(catalog_url)
    names = ("weather.radar", "weather.sub.x", "weatherx.y", "weather_a.b", "sales.orders")
    for name in names:
        cat.create_dataset(name, format="delta", location=f"/data/{name}")
        cat.label(name, "gold")
    for within in (["weather.*"], ["sales.orders", "weather.sub.*"], ["weather_.*"], [], ["*"], ["nope"]):
        expected = sorted(n for n in names if allows([Grant("p", "READ", t) for t in within], "READ", n))
        found = [d.name for d, _, _ in cat.search_datasets(None, limit=100, within=within)]
        assert found == expected, within
        assert cat.count_datasets(within=within) == len(expected)
        assert cat.facets(within=within)["label"] == ({"gold": len(expected)} if expected else {})
    assert cat.count_datasets("radar", within=["sales.*"]) == 0 and cat.count_datasets("radar") == 1
