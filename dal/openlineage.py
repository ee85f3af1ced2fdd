"""OpenLineage run events for dal's writes (and, optionally, reads), sent with the ``openlineage-python`` client.

Each ``dal.write`` is one OpenLineage run: a ``START`` event when its data starts going to storage and a
``COMPLETE`` event once the catalog recorded the version (``FAIL`` if it failed after starting). The output
dataset carries the schema, the catalog version and the row count, file count and size of the new version;
the inputs are the write's lineage inputs (declared or inferred, ``dal.lineage``) with their versions. With
``DAL_OPENLINEAGE_READS=1`` each ``dal.open`` is a run of its own (a ``COMPLETE`` event with the input).

Where events go is the client's own configuration: ``OPENLINEAGE_URL`` (HTTP), an ``openlineage.yml``
(``OPENLINEAGE_CONFIG``, the working directory or ``~/.openlineage/``), or ``OPENLINEAGE__TRANSPORT__*``
variables (file, console, HTTP, Kafka, ...). dal emits when such a configuration exists or
``DAL_OPENLINEAGE=1``; ``DAL_OPENLINEAGE=0`` (or the client's ``OPENLINEAGE_DISABLED=true``) turns it off.
Datasets are named ``<DAL_OPENLINEAGE_NAMESPACE>`` (default ``dal``) / the dataset's catalog name; the job is
``<program>.<dataset>`` unless ``DAL_OPENLINEAGE_JOB`` names it.

Events are sent by one background thread, so a slow or absent consumer never delays or fails a write: a
failure to send is logged (``dal.openlineage`` logger, a warning) and the write goes on. ``flush()`` waits
for the events queued so far (at exit it is called with a short timeout).
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import sys
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dal.catalog.types import Input, VersionInfo

ENV_ENABLE = "DAL_OPENLINEAGE"
ENV_READS = "DAL_OPENLINEAGE_READS"
ENV_NAMESPACE = "DAL_OPENLINEAGE_NAMESPACE"
ENV_JOB = "DAL_OPENLINEAGE_JOB"
PRODUCER = "https://pypi.org/project/dal-catalog/"
EXIT_FLUSH_S = 5.0
_FALSE = {"0", "false", "no", "off"}
_TRUE = {"1", "true", "yes", "on"}
_log = logging.getLogger("dal.openlineage")

_queue: queue.Queue[Callable[[], Any] | None] = queue.Queue(maxsize=10_000)
_worker: threading.Thread | None = None
_client: Any = None
_lock = threading.Lock()
_warned_missing = False


def enabled() -> bool:
    """Whether dal emits events: ``DAL_OPENLINEAGE`` decides when set, otherwise whether the OpenLineage client
    has a configuration (``OPENLINEAGE_URL``, ``OPENLINEAGE_CONFIG``, ``OPENLINEAGE__TRANSPORT__*``, or an
    ``openlineage.yml`` in the working directory or ``~/.openlineage/``)."""
    flag = os.environ.get(ENV_ENABLE, "").strip().lower()
    if flag in _FALSE:
        return False
    if flag in _TRUE:
        return True
    if os.environ.get("OPENLINEAGE_URL") or os.environ.get("OPENLINEAGE_CONFIG"):
        return True
    if any(k.startswith("OPENLINEAGE__TRANSPORT") for k in os.environ):
        return True
    return any(p.is_file() for p in (Path.cwd() / "openlineage.yml", Path.home() / ".openlineage" / "openlineage.yml"))


def reads_enabled() -> bool:
    return enabled() and os.environ.get(ENV_READS, "").strip().lower() in _TRUE


def _namespace() -> str:
    return os.environ.get(ENV_NAMESPACE) or "dal"


def _job_name(dataset: str) -> str:
    if os.environ.get(ENV_JOB):
        return os.environ[ENV_JOB]
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] not in ("", "-c", "-m") else "python"
    return f"{program}.{dataset}"


class WriteRun:
    """One write as an OpenLineage run: ``start()`` before storage is touched, then ``complete(version)`` or
    ``fail(error)``. Every method returns at once and never raises."""

    def __init__(self, dataset: str, inputs: Sequence[Input]) -> None:
        self.dataset = dataset
        self.inputs = list(inputs)
        self.run_id = ""
        self.active = enabled()
        if self.active:
            try:
                from openlineage.client.uuid import generate_new_uuid

                self.run_id = str(generate_new_uuid())
            except ImportError:
                self.active = False
                _missing()

    def start(self) -> None:
        if self.active:
            _submit(lambda: _event("START", self.run_id, self.dataset, self.inputs, None, None))

    def complete(self, version: VersionInfo) -> None:
        if self.active:
            _submit(lambda: _event("COMPLETE", self.run_id, self.dataset, self.inputs, version, None))

    def fail(self, error: BaseException) -> None:
        if self.active:
            message = f"{type(error).__name__}: {error}"
            _submit(lambda: _event("FAIL", self.run_id, self.dataset, self.inputs, None, message))


def emit_read(dataset: str, version: int) -> None:
    """A read (``dal.open``) as a run of its own, when ``DAL_OPENLINEAGE_READS=1``; returns at once."""
    if not reads_enabled():
        return
    try:
        from openlineage.client.uuid import generate_new_uuid
    except ImportError:
        _missing()
        return
    run_id = str(generate_new_uuid())
    _submit(lambda: _event("COMPLETE", run_id, None, [Input(dataset, version)], None, None))


def _missing() -> None:
    global _warned_missing
    if not _warned_missing:
        _warned_missing = True
        _log.warning("OpenLineage events are configured but not sent: pip install 'dal-catalog[openlineage]'")


def _event(
    state: str,
    run_id: str,
    dataset: str | None,
    inputs: Sequence[Input],
    version: VersionInfo | None,
    error: str | None,
) -> Any:
    """Build the RunEvent (on the sending thread: the client's classes load there, not in the write)."""
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import (
        dataset_version_dataset,
        error_message_run,
        job_type_job,
        output_statistics_output_dataset,
        processing_engine_run,
        schema_dataset,
    )

    from dal._version import __version__

    ns = _namespace()
    run_facets: dict[str, Any] = {
        "processing_engine": processing_engine_run.ProcessingEngineRunFacet(
            version=__version__, name="dal", openlineageAdapterVersion=__version__, producer=PRODUCER
        )
    }
    if error is not None:
        run_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=error[:2000], programmingLanguage="python", producer=PRODUCER
        )
    ins = [
        InputDataset(
            namespace=ns,
            name=i.dataset,
            facets={
                "version": dataset_version_dataset.DatasetVersionDatasetFacet(
                    datasetVersion=str(i.version), producer=PRODUCER
                )
            },
        )
        for i in inputs
    ]
    outs = []
    if dataset is not None:
        facets: dict[str, Any] = {}
        output_facets: dict[str, Any] = {}
        if version is not None:
            facets["schema"] = schema_dataset.SchemaDatasetFacet(
                fields=[
                    schema_dataset.SchemaDatasetFacetFields(
                        name=f.name, type=f.type, description=f.describe() if f.is_tensor else None, ordinal_position=n
                    )
                    for n, f in enumerate(version.schema, start=1)
                ],
                producer=PRODUCER,
            )
            facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(
                datasetVersion=str(version.number), producer=PRODUCER
            )
            output_facets["outputStatistics"] = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                rowCount=version.row_count, size=version.size_bytes, fileCount=version.file_count, producer=PRODUCER
            )
        outs.append(OutputDataset(namespace=ns, name=dataset, facets=facets, outputFacets=output_facets))
    job_facets: dict[str, Any] = {
        "jobType": job_type_job.JobTypeJobFacet(
            processingType="BATCH", integration="DAL", jobType="WRITE" if dataset else "READ", producer=PRODUCER
        )
    }
    return RunEvent(
        eventType=getattr(RunState, state),
        eventTime=datetime.now(UTC).isoformat(),
        run=Run(runId=run_id, facets=run_facets),
        job=Job(namespace=ns, name=_job_name(dataset or (inputs[0].dataset if inputs else "read")), facets=job_facets),
        inputs=ins,
        outputs=outs,
        producer=PRODUCER,
    )


def _submit(build: Callable[[], Any]) -> None:
    global _worker
    with _lock:
        if _worker is None or not _worker.is_alive():
            _worker = threading.Thread(target=_run, name="dal-openlineage", daemon=True)
            _worker.start()
    try:
        _queue.put_nowait(build)
    except queue.Full:
        _log.warning("OpenLineage: %d events waiting to be sent; dropping one", _queue.qsize())


def _get_client() -> Any:
    global _client
    if _client is None:
        from openlineage.client import OpenLineageClient

        _client = OpenLineageClient()
    return _client


def _run() -> None:
    while True:
        build = _queue.get()
        try:
            if build is None:
                return
            event = build()
            _get_client().emit(event)
        except Exception as e:  # a consumer that is down, a bad configuration: the write is not affected
            _log.warning(
                "OpenLineage event not sent: %s: %s", type(e).__name__, str(e).splitlines()[0] if str(e) else ""
            )
        finally:
            _queue.task_done()


def flush(timeout: float = 30.0) -> bool:
    """Wait until the events queued so far were sent (or failed); False if ``timeout`` seconds passed first."""
    done = threading.Event()

    def wait() -> None:
        _queue.join()
        done.set()

    if _worker is None:
        return True
    threading.Thread(target=wait, daemon=True).start()
    return done.wait(timeout)


def reset() -> None:
    """Forget the client (its configuration is read again at the next event), after sending what is queued."""
    global _client
    flush()
    with _lock:
        if _client is not None:
            try:
                _client.close(1.0)
            except Exception:  # closing a transport that never connected
                pass
        _client = None


atexit.register(lambda: flush(EXIT_FLUSH_S))
