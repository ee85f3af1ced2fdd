"""The OpenAPI document of ``dal ui`` describes what each route answers: every 200 response has a schema (derived
from the catalog's frozen dataclasses), and real responses of every documented route validate against it
(``jsonschema``, Draft 2020-12, which OpenAPI 3.1 uses); the lineage JSON lists each upstream version once."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tests.ui.conftest import Server

pytestmark = pytest.mark.slow

# each documented route, with path parameters and queries that give a full answer on the test catalog
EXAMPLES = {
    "/api": ["/api"],
    "/api/openapi.json": ["/api/openapi.json"],
    "/api/datasets": ["/api/datasets", "/api/datasets?q=radar&format=delta&sort=-rows"],
    "/api/datasets/{name}": ["/api/datasets/weather.radar", "/api/datasets/vision.scans", "/api/datasets/filler.ds_000"],
    "/api/datasets/{name}/versions": ["/api/datasets/weather.radar/versions", "/api/datasets/vision.street_scenes/versions"],
    "/api/datasets/{name}/schema": ["/api/datasets/vision.scans/schema", "/api/datasets/weather.radar/schema?version=0"],
    "/api/datasets/{name}/diff": ["/api/datasets/weather.radar/diff?old=0&new=2",
                                  "/api/datasets/vision.street_scenes/diff?old=3&new=8"],
    "/api/datasets/{name}/partitions": ["/api/datasets/weather.radar/partitions?version=2"],
    "/api/datasets/{name}/tags": ["/api/datasets/weather.radar/tags"],
    "/api/datasets/{name}/preview": ["/api/datasets/vision.scans/preview?rows=3", "/api/datasets/weather.radar/preview"],
    "/api/datasets/{name}/versions/{v}/lineage": ["/api/datasets/weather.radar/versions/2/lineage"],
}  # fmt: skip


def validator(document: dict[str, Any], path: str, status: str = "200") -> Draft202012Validator:
    schema = document["paths"][path]["get"]["responses"][status]["content"]["application/json"]["schema"]
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator({**schema, "components": document["components"]})


def test_every_route_answers_what_its_schema_says(server: Server) -> None:
    status, document = server.json("/api/openapi.json")
    assert status == 200 and set(EXAMPLES) == set(document["paths"])
    for path, examples in EXAMPLES.items():
        check = validator(document, path)
        assert check.schema != {"components": document["components"]}, f"{path}: no schema"
        for example in examples:
            status, body = server.json(example)
            assert status == 200, (example, body)
            errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in check.iter_errors(body)]
            assert not errors, (example, errors[:5])
    status, body = server.json("/api/datasets/no.such")
    assert status == 404 and validator(document, "/api/datasets/{name}", "404").is_valid(body)


def test_schemas_are_strict_enough_to_catch_a_wrong_answer(server: Server) -> None:
    _, document = server.json("/api/openapi.json")
    _, shown = server.json("/api/datasets/weather.radar")
    check = validator(document, "/api/datasets/{name}")
    assert check.is_valid(shown)
    assert not check.is_valid({**shown, "latest_version": "2"})  # a number as text
    assert not check.is_valid({k: v for k, v in shown.items() if k != "created_at"})  # a key missing
    broken = json.loads(json.dumps(shown))
    broken["latest"]["schema"][0]["nullable"] = "yes"  # a field of a field (components, through $ref)
    assert not check.is_valid(broken)
    fields = document["components"]["schemas"]["Field"]["properties"]
    assert {"name", "type", "nullable", "dtype", "shape", "codec", "description"} <= set(fields)  # from the dataclass


def cli_lineage(server: Server, *args: str) -> Any:
    out = subprocess.run(
        [sys.executable, "-m", "dal.cli", "--catalog", server.catalog_url, "lineage", *args, "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(out.stdout)


def test_lineage_lists_an_upstream_version_once(lineage_server: Server) -> None:
    status, body = lineage_server.json("/api/datasets/chain.twice/versions/0/lineage")
    assert status == 200 and body == cli_lineage(lineage_server, "chain.twice", "0")
    assert [(u["dataset"], u["version"]) for u in body["upstream"]] == [("twice.src", 0)]
    assert body["upstream"][0]["filters"] == "(x > 1) OR (x < 3)"
    _, document = lineage_server.json("/api/openapi.json")
    assert validator(document, "/api/datasets/{name}/versions/{v}/lineage").is_valid(body)
    page = lineage_server.get("/d/chain.twice")[2].decode()
    assert page.count('href="/d/twice.src?v=0"') >= 1 and "(x &gt; 1) OR (x &lt; 3)" in page
