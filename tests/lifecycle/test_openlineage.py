"""OpenLineage run events of dal.write (and of reads when asked), sent with the real openlineage-python client to
a consumer on loopback and to a file, checked against a JSON Schema of the OpenLineage spec.

The spec's own ``OpenLineage.json`` ships in no package on PyPI (the client, the integrations and the Airflow
provider were searched), so the schema is built here from the client's classes, which the OpenLineage project
generates from that spec: every class becomes an object schema with its required fields and their JSON types,
each facet must carry ``_producer`` and ``_schemaURL``, the event's ``eventTime`` must be an ISO-8601 date-time
and ``runId`` a UUID (the spec's formats)."""

from __future__ import annotations

import enum
import http.server
import json
import logging
import threading
import types
import typing
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import attr
import jsonschema
import pyarrow as pa
import pytest
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent
from openlineage.client.facet_v2 import (
    dataset_version_dataset,
    error_message_run,
    job_type_job,
    output_statistics_output_dataset,
    processing_engine_run,
    schema_dataset,
    tags_job,
    tags_run,
)

import dal
from dal import lineage, openlineage
from dal.catalog import Catalog

# the facets an event may hold, where, by key (dal's, and the tags the client adds itself)
FACETS: dict[tuple[str, str], dict[str, type]] = {
    ("Run", "facets"): {
        "processing_engine": processing_engine_run.ProcessingEngineRunFacet,
        "errorMessage": error_message_run.ErrorMessageRunFacet,
        "tags": tags_run.TagsRunFacet,
    },
    ("Job", "facets"): {"jobType": job_type_job.JobTypeJobFacet, "tags": tags_job.TagsJobFacet},
    ("InputDataset", "facets"): {"version": dataset_version_dataset.DatasetVersionDatasetFacet},
    ("OutputDataset", "facets"): {
        "schema": schema_dataset.SchemaDatasetFacet,
        "version": dataset_version_dataset.DatasetVersionDatasetFacet,
    },
    ("OutputDataset", "outputFacets"): {
        "outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet
    },
}


def _type_schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        inner = [_type_schema(a, defs) for a in options]
        return {"anyOf": inner} if len(inner) > 1 else inner[0]
    if origin is list:
        return {"type": "array", "items": _type_schema(args[0], defs)}
    if origin is dict:  # facets: each value must be a facet (named ones as their class says)
        return {"type": "object", "additionalProperties": _type_schema(args[1], defs)}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
    if tp is str:
        return {"type": "string"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is Any:
        return {}
    if attr.has(tp):
        return _class_schema(tp, defs)
    raise AssertionError(f"no schema for {tp!r}")


def _class_schema(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    name = cls.__name__
    if name not in defs:
        defs[name] = {}  # recursion guard
        hints = typing.get_type_hints(cls)
        props, required = {}, []
        for f in attr.fields(cls):
            if not f.init and not f.name.startswith("_"):
                continue
            key = f.name  # facets keep their leading underscore in JSON (_producer, _schemaURL)
            props[key] = _type_schema(hints[f.name], defs)
            if f.default is attr.NOTHING or f.name in ("_producer", "_schemaURL", "producer", "schemaURL"):
                required.append(key)
        defs[name] = {"type": "object", "properties": props, "required": sorted(required)}
    return {"$ref": f"#/$defs/{name}"}


def event_schema() -> dict[str, Any]:
    defs: dict[str, Any] = {}
    root = _class_schema(RunEvent, defs)
    for cls in (Run, Job, InputDataset, OutputDataset, *(c for f in FACETS.values() for c in f.values())):
        _class_schema(cls, defs)
    for (holder, key), facets in FACETS.items():  # each facet by its key, as the spec names them
        defs[holder]["properties"][key] = {
            "type": "object",
            "properties": {k: {"$ref": f"#/$defs/{c.__name__}"} for k, c in facets.items()},
            "additionalProperties": False,
        }
    defs["RunEvent"]["required"] = sorted({*defs["RunEvent"]["required"], "eventType"})
    return {"$defs": defs, **root}


SCHEMA = event_schema()


def validate(event: dict[str, Any]) -> None:
    jsonschema.validate(event, SCHEMA)
    datetime.fromisoformat(event["eventTime"])  # format: date-time
    assert "T" in event["eventTime"]
    uuid.UUID(event["run"]["runId"])  # format: uuid
    assert event["schemaURL"].startswith("https://openlineage.io/spec/")
    for facets in [event["run"].get("facets", {}), event["job"].get("facets", {})] + [
        d.get(k, {}) for d in event["inputs"] + event["outputs"] for k in ("facets", "outputFacets")
    ]:
        for facet in facets.values():
            assert facet["_schemaURL"].startswith("https://openlineage.io/spec/facets/"), facet
            assert facet["_producer"].startswith("https://"), facet


class Consumer:
    """An OpenLineage HTTP consumer on 127.0.0.1 that keeps every event it is sent (optionally held up)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.release = threading.Event()
        self.release.set()
        self.arrived = threading.Event()
        consumer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                consumer.arrived.set()
                consumer.release.wait(60)
                consumer.paths.append(self.path)
                consumer.events.append(json.loads(body))
                self.send_response(201)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for k in list(__import__("os").environ):
        if k.startswith("OPENLINEAGE") or k.startswith("DAL_OPENLINEAGE"):
            monkeypatch.delenv(k)
    monkeypatch.chdir(tmp_path)  # no openlineage.yml in the working directory
    monkeypatch.setenv("HOME", str(tmp_path))
    lineage.clear_read_log()
    openlineage.reset()
    yield
    openlineage.reset()
    lineage.clear_read_log()


@pytest.fixture
def consumer(monkeypatch: pytest.MonkeyPatch) -> Iterator[Consumer]:
    c = Consumer()
    monkeypatch.setenv("OPENLINEAGE_URL", c.url)
    yield c
    c.close()


def test_a_write_is_a_run_start_and_complete_with_facets(cat: Catalog, consumer: Consumer) -> None:
    dal.write(pa.table({"id": pa.array([1, 2, 3], pa.int64())}), "ol.src")
    assert openlineage.flush()
    consumer.events.clear()
    consumer.paths.clear()
    src = dal.open("ol.src")
    v = dal.write(pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]}), "ol.out", inputs=[src])
    assert openlineage.flush()
    start, complete = consumer.events
    assert consumer.paths == ["/api/v1/lineage", "/api/v1/lineage"]
    for e in (start, complete):
        validate(e)
    assert (start["eventType"], complete["eventType"]) == ("START", "COMPLETE")
    assert start["run"]["runId"] == complete["run"]["runId"]
    assert complete["job"] == {**complete["job"], "namespace": "dal"} and complete["job"]["name"].endswith(".ol.out")
    assert [(i["namespace"], i["name"], i["facets"]["version"]["datasetVersion"]) for i in complete["inputs"]] == [
        ("dal", "ol.src", "0")
    ]
    (out,) = complete["outputs"]
    assert (out["namespace"], out["name"]) == ("dal", "ol.out")
    assert [(f["name"], f["type"]) for f in out["facets"]["schema"]["fields"]] == [(f.name, f.type) for f in v.schema]
    assert out["facets"]["version"]["datasetVersion"] == str(v.number) == "0"
    stats = out["outputFacets"]["outputStatistics"]
    assert (stats["rowCount"], stats["size"], stats["fileCount"]) == (2, v.size_bytes, v.file_count)
    assert complete["run"]["facets"]["processing_engine"]["name"] == "dal"


def test_inferred_inputs_and_reads_as_runs(cat: Catalog, consumer: Consumer, monkeypatch: pytest.MonkeyPatch) -> None:
    dal.write(pa.table({"id": [1]}), "ol.a")
    monkeypatch.setenv(openlineage.ENV_READS, "1")
    a = dal.open("ol.a")
    dal.write(a.to_arrow(), "ol.b")
    assert openlineage.flush()
    kinds = [(e["eventType"], [i["name"] for i in e["inputs"]], [o["name"] for o in e["outputs"]])
             for e in consumer.events]  # fmt: skip
    assert kinds[2:] == [("COMPLETE", ["ol.a"], []), ("START", ["ol.a"], ["ol.b"]), ("COMPLETE", ["ol.a"], ["ol.b"])]
    for e in consumer.events:
        validate(e)


def test_file_transport_from_the_clients_env_configuration(cat: Catalog, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    log = tmp_path / "events.jsonl"
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", "file")
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__LOG_FILE_PATH", str(log))
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__APPEND", "true")
    dal.write(pa.table({"id": [1, 2]}), "ol.file")
    assert openlineage.flush()
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    for e in events:
        validate(e)


def test_a_failed_write_ends_its_run_with_fail(cat: Catalog, consumer: Consumer) -> None:
    dal.write(pa.table({"id": pa.array([1], pa.int64())}), "ol.f")
    with pytest.raises(dal.errors.SchemaMismatch):  # refused before the run starts (dal.writes.refusals): no run
        dal.write(pa.table({"id": ["not a number"]}), "ol.f")
    schema = pa.schema([("id", pa.int64())])

    def source() -> Iterator[pa.RecordBatch]:  # a stream whose source goes away after its first batch
        yield pa.record_batch([pa.array([2], pa.int64())], schema=schema)
        raise OSError("the source went away")

    with pytest.raises(dal.errors.DalError, match="the source went away"):
        dal.write(pa.RecordBatchReader.from_batches(schema, source()), "ol.f")
    assert openlineage.flush()
    # the stream failed as it was written, after the run started: the run ends with FAIL and the error
    assert [e["eventType"] for e in consumer.events] == ["START", "COMPLETE", "START", "FAIL"]
    fail = consumer.events[-1]
    validate(fail)
    assert fail["run"]["runId"] == consumer.events[2]["run"]["runId"]
    assert "the source went away" in fail["run"]["facets"]["errorMessage"]["message"]
    assert fail["outputs"][0]["name"] == "ol.f" and "schema" not in fail["outputs"][0]["facets"]
    assert [v.number for v in cat.versions("ol.f")] == [0]


def test_a_consumer_that_hangs_or_is_down_never_holds_up_or_fails_a_write(
    cat: Catalog, consumer: Consumer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    consumer.release.clear()  # the consumer takes the request and does not answer
    v = dal.write(pa.table({"id": [1]}), "ol.slow")
    assert consumer.arrived.wait(60)  # the START event reached it ...
    assert v.number == 0 and not consumer.events  # ... and the write returned while it still hangs
    consumer.release.set()
    assert openlineage.flush()
    assert [e["eventType"] for e in consumer.events] == ["START", "COMPLETE"]

    consumer.close()  # down: connection refused
    openlineage.reset()
    with caplog.at_level(logging.WARNING, logger="dal.openlineage"):
        v = dal.write(pa.table({"id": [2]}), "ol.slow")
        assert openlineage.flush()
    assert v.number == 1 and [x.number for x in cat.versions("ol.slow")] == [0, 1]
    assert any("OpenLineage event not sent" in r.getMessage() for r in caplog.records)


def test_off_unless_configured(cat: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not openlineage.enabled()  # no configuration: nothing is sent (the client would print to the console)
    assert not openlineage.WriteRun("x.y", []).active
    monkeypatch.setenv("OPENLINEAGE_URL", "http://127.0.0.1:9")
    assert openlineage.enabled()
    monkeypatch.setenv(openlineage.ENV_ENABLE, "0")
    assert not openlineage.enabled()
    monkeypatch.delenv("OPENLINEAGE_URL")
    monkeypatch.delenv(openlineage.ENV_ENABLE)
    (tmp_path / "openlineage.yml").write_text("transport:\n  type: console\n")
    assert openlineage.enabled()
