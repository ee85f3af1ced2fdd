"""Lineage in ``dal ui``: the JSON API gives what ``dal lineage --json`` prints, and the dataset page shows the
producer and a graph of linked versions, with hostile text kept text and credentials masked."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.ui.conftest import FORGED_PROGRAM, HOSTILE, SECRETS, Server


def cli_json(server: Server, *args: str) -> object:
    out = subprocess.run(
        [sys.executable, "-m", "dal.cli", "--catalog", server.catalog_url, "lineage", *args, "--json"],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    return json.loads(out.stdout)


def test_api_equals_the_cli_json(lineage_server: Server) -> None:
    status, b = lineage_server.json("/api/datasets/chain.b/versions/0/lineage")
    assert status == 200
    assert b == cli_json(lineage_server, "chain.b", "0")
    assert [(u["dataset"], u["version"]) for u in b["upstream"]] == [("chain.a", 0)]
    assert b["downstream"] == [{"dataset": "chain.c", "version": 0, "how": "inferred"}]
    assert b["user"] and b["host"] and b["time"] and b["dal_version"] and "git" in b and "program" in b

    status, a = lineage_server.json("/api/datasets/chain.a/versions/latest/lineage?depth=3")
    assert status == 200 and a == cli_json(lineage_server, "chain.a", "--depth", "3")
    assert a["upstream"] == []
    chain_b = a["downstream"][0]
    assert (chain_b["dataset"], chain_b["version"]) == ("chain.b", 0)
    assert [(d["dataset"], d["version"]) for d in chain_b["downstream"]] == [("chain.c", 0)]


def test_api_errors(lineage_server: Server) -> None:
    status, body = lineage_server.json("/api/datasets/chain.b/versions/7/lineage")
    assert status == 404 and "chain.b" in body["error"]
    status, body = lineage_server.json("/api/datasets/nope.x/versions/0/lineage")
    assert status == 404
    status, body = lineage_server.json("/api/datasets/chain.b/versions/0/lineage?depth=x")
    assert status == 400 and "depth" in body["error"]


def test_page_shows_producer_and_linked_graph(lineage_server: Server) -> None:
    status, _, raw = lineage_server.get("/d/chain.b")
    page = raw.decode()
    assert status == 200 and 'id="lineage-graph"' in page and 'id="lineage-facts"' in page
    assert 'href="/d/chain.a?v=0"' in page and 'href="/d/chain.c?v=0"' in page
    assert "no-lineage" not in page.replace("no-lineage-graph", "")
    # chain.a was not written from anything read: facts, a graph with its downstream only
    page_a = lineage_server.get("/d/chain.a")[2].decode()
    assert 'href="/d/chain.b?v=0"' in page_a and 'id="lineage-facts"' in page_a


def test_no_lineage_recorded(server: Server) -> None:
    page = server.get("/d/vision.street_scenes")[2].decode()
    assert 'id="no-lineage"' in page and 'id="lineage-graph"' not in page
    status, body = server.json("/api/datasets/vision.street_scenes/versions/3/lineage")
    assert status == 200 and body["upstream"] == [] and body["downstream"] == [] and "time" not in body


def test_hostile_lineage_stays_text_and_secrets_masked(lineage_server: Server) -> None:
    status, headers, raw = lineage_server.get("/d/chain.forged")
    page = raw.decode()
    assert status == 200 and "script-src" not in headers["content-security-policy"]
    assert HOSTILE not in page and "<script>" not in page and "<img" not in page
    assert "&lt;script&gt;alert(" in page  # shown, as text
    for secret in (*SECRETS, "lineagesecret"):
        assert secret not in page, secret
    assert 'id="lineage-program"' in page and "/jobs/run.py?token=***" in page
    status, body = lineage_server.json("/api/datasets/chain.forged/versions/0/lineage")
    assert status == 200 and body["program"] != FORGED_PROGRAM and "lineagesecret" not in json.dumps(body)
    assert "wJalrXUtnFEMI" not in json.dumps(body) and body["upstream"][0]["dataset"] == HOSTILE
    # the chain's hostile description stays text on its page too
    page_b = lineage_server.get("/d/chain.b")[2].decode()
    assert HOSTILE not in page_b and "&lt;script&gt;" in page_b


def test_graph_caps_nodes_and_escapes_labels() -> None:
    from dal.ui.charts import Node, lineage_graph

    up = [Node(f"up.{i} @ 0", "<b>tip</b>", f"/d/up.{i}?v=0") for i in range(15)]
    svg = lineage_graph(up, Node(HOSTILE, HOSTILE), [], element_id="g")
    assert svg.count("<a ") == 12 and "+3 more" in svg
    assert "<b>" not in svg and "<script>" not in svg and "&lt;script&gt;" in svg


def test_page_labels_each_edge_declared_or_inferred(lineage_server: Server) -> None:
    """The chain was written by reads (inferred): the page says so, and the legend says what each label means;
    a declared edge is drawn solid and labelled declared."""
    page = lineage_server.get("/d/chain.b")[2].decode()
    assert 'class="edge inferred"' in page and 'class="node upstream inferred"' in page
    assert 'class="node downstream inferred"' in page and 'id="lineage-legend"' in page
    assert "written from it" not in page and "declared" in page  # no edge stated as fact; the legend explains

    from dal.ui.charts import Node, lineage_graph

    svg = lineage_graph([Node("a @ 0", "a", "/d/a?v=0", "declared")], Node("b @ 0", "b"), [], element_id="g")
    assert 'class="edge declared"' in svg and "stroke-dasharray" not in svg
    assert 'class="how">declared</text>' in svg
    assert "the writer named this input" in svg
