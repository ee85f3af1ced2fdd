"""Search in ``dal ui`` says why each dataset matched (its name, description, owner or format, or the tag or column
that contains the words), and the column facet takes part of a column name in any case."""

from __future__ import annotations

import pytest

from tests.ui.conftest import Server

pytestmark = pytest.mark.slow


def matched(server: Server, query: str) -> dict[str, list[tuple[str, str | None]]]:
    status, body = server.json(f"/api/datasets?{query}&per_page=200")
    assert status == 200, body
    return {d["name"]: [(m["in"], m["value"]) for m in d["matched"]] for d in body["datasets"]}


def test_each_result_says_why_it_matched(server: Server) -> None:
    assert matched(server, "q=QUALITY") == {"weather.radar": [("column", "quality")]}
    assert matched(server, "q=hourly") == {"weather.radar": [("description", None)]}
    radar = matched(server, "q=radar")["weather.radar"]
    assert radar == [("name", None), ("description", None)]
    prod = matched(server, "q=prod")
    assert prod["weather.radar"] == [("tag", "prod")] and prod["vision.street_scenes"] == [("tag", "prod")]
    assert matched(server, "q=lane_")["vision.street_scenes"] == [("column", "lane_mask")]
    assert {tuple(r) for r in matched(server, "q=filler.ds_00*").values()} == {(("name", None),)}
    assert all(reasons == [] for reasons in matched(server, "format=delta").values())  # no words: no reasons


def test_column_facet_takes_part_of_a_name(server: Server) -> None:
    assert list(matched(server, "column=STAT")) == ["weather.radar"]
    assert list(matched(server, "column=mask")) == ["vision.street_scenes"]
    assert list(matched(server, "column=%25")) == []  # LIKE metacharacters are literal
