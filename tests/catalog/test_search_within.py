"""``Catalog.search_datasets``, ``count_datasets`` and ``facets`` within grant targets (``within=``: the datasets a
principal may read, as the web UI of ``dal serve`` pages, counts and facets them), on SQLite and PostgreSQL: a
namespace covers its names only (``_`` and ``%`` in a target match themselves), a name itself, ``*`` everything,
no target nothing; a count or a facet never includes a dataset outside."""

from __future__ import annotations

import pytest

from dal.catalog import Catalog
from dal.catalog.auth import matches

NAMES = ("a_b.x", "axb.y", "a_b.sub.z", "sales.orders", "sales_x.y", "weather.radar")
TARGETS = (
    ("a_b.*",),
    ("sales.*",),
    ("sales.orders", "weather.radar"),
    ("*",),
    ("weather.*", "sales.orders"),
    ("nothing.here",),
    (),
)


@pytest.fixture
def cat(catalog_url: str) -> Catalog:
    cat = Catalog(catalog_url)
    for i, name in enumerate(NAMES):
        cat.create_dataset(name, format="delta" if i % 2 else "parquet", location=f"/data/{name}", owner=f"o{i % 3}")
    return cat


@pytest.mark.parametrize("within", TARGETS)
def test_within_grant_targets(cat: Catalog, within: tuple[str, ...]) -> None:
    covered = sorted(n for n in NAMES if any(matches(t, n) for t in within))
    assert [d.name for d, _, _ in cat.search_datasets(within=within)] == covered
    assert cat.count_datasets(within=within) == len(covered)
    facets = cat.facets(within=within)
    assert sum(facets["format"].values()) == sum(facets["owner"].values()) == len(covered)
    # with a query and a facet, and a page of one: still only what the targets cover
    found = cat.search_datasets("*.*", within=within, filters={"format": "delta"}, limit=1, offset=1, sort="-name")
    delta = sorted((n for n in covered if NAMES.index(n) % 2), reverse=True)
    assert [d.name for d, _, _ in found] == delta[1:2]
    assert cat.count_datasets("a", {"format": "delta"}, within=within) == len([n for n in delta if "a" in n])
    assert cat.search_datasets(within=None) == cat.search_datasets()  # None: every dataset
