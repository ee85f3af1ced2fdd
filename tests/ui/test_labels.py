"""Labels in ``dal ui``: the dataset's JSON (``/api/datasets/{name}``), search by a label with the reason ("label
pii (column station)"), the label facet, and in a real Chromium the dataset page's labels (linking to the facet)
and each column's in the schema table. The labels are the ones ``tests/ui/conftest.py`` puts on."""

from __future__ import annotations

from typing import Any

import pytest

from tests.ui.conftest import Server
from tests.ui.test_browser import browser, by_id, navigate  # noqa: F401  (browser: the Chromium fixture)

pytestmark = pytest.mark.slow


def test_dataset_json_has_its_labels(server: Server) -> None:
    status, radar = server.json("/api/datasets/weather.radar")
    assert status == 200 and radar["labels"] == {"dataset": ["gold"], "columns": {"station": ["pii"]}}
    _, scenes = server.json("/api/datasets/vision.street_scenes")
    assert scenes["labels"] == {"dataset": ["domain=vision", "gold"], "columns": {}}
    _, odd = server.json("/api/datasets/odd.under_score")
    assert odd["labels"] == {"dataset": [], "columns": {}}


def test_search_by_label_says_why_and_the_facet_counts(server: Server) -> None:
    _, found = server.json("/api/datasets?q=pii")
    assert [(d["name"], d["matched"]) for d in found["datasets"]] == [
        ("weather.radar", [{"in": "label", "value": "pii (column station)"}])
    ]
    _, found = server.json("/api/datasets?q=domain%3Dvis")
    assert [(d["name"], d["matched"]) for d in found["datasets"]] == [
        ("vision.street_scenes", [{"in": "label", "value": "domain=vision"}])
    ]
    _, gold = server.json("/api/datasets?label=gold")
    assert [d["name"] for d in gold["datasets"]] == ["vision.street_scenes", "weather.radar"]
    assert gold["filters"] == {"label": "gold"}
    assert gold["facets"]["label"] == {"gold": 2, "domain=vision": 1, "pii": 1}
    _, pii = server.json("/api/datasets?label=pii")
    assert [d["name"] for d in pii["datasets"]] == ["weather.radar"] and pii["facets"]["tag"] == {"prod": 1}
    _, none = server.json("/api/datasets?label=%3Cscript%3E")
    assert none["total"] == 0


def test_the_dataset_page_shows_labels_and_links_to_the_facet(browser: Any, sqlite_server: Server) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    d = browser
    d.get(sqlite_server.base + "/d/weather.radar")
    assert [a.text for a in by_id(d, "labels").find_elements(By.CSS_SELECTOR, "a.label")] == ["gold"]
    cells = {
        r.find_elements(By.TAG_NAME, "td")[1].text.split()[0]: r.find_element(By.CSS_SELECTOR, "td.labels").text
        for r in d.find_elements(By.CSS_SELECTOR, "#schema tbody tr")
    }
    assert cells == {"date": "", "station": "pii", "value": "", "quality": ""}
    navigate(d, d.find_element(By.CSS_SELECTOR, "#schema td.labels a.label"))
    names = [a.text for a in d.find_elements(By.CSS_SELECTOR, "#datasets a.dataset-link")]
    assert names == ["weather.radar"]
    assert by_id(d, "facet-label").get_attribute("value") == "pii"
