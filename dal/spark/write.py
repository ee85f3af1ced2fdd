"""Spark writes: DataFrames written distributedly into dal formats.

Without the delta-spark JVM classes (they cannot be downloaded here), executors write Parquet files with
pyarrow (``mapInArrow``) and the driver commits them all as ONE Delta version through delta-rs. With the
classes on the classpath (a real cluster, Databricks), delta-spark's own writer is used, except for an overwrite
of an existing table (``DeltaWrite.spark_options``: staged, so that it commits only on the version it read)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dal import progress
from dal._testhooks import pause
from dal.errors import DalError, SchemaMismatch
from dal.formats.inputs import checked_batches
from dal.storage import uris

if TYPE_CHECKING:
    from dal.formats.base import Format, WriteTransaction

from dal.spark.session import native_source, worker_import_error
from dal.spark.types import arrow_schema, type_problems


def _stage(txn: WriteTransaction, schema: pa.Schema, counters: tuple[Any, Any, Any] | None = None) -> Any:
    """The executors' side of a staged write: cast each batch to ``schema``, stage the files, yield their records
    (adding the task's rows, files and bytes to the ``counters`` accumulators when a progress line is drawn)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        seen = [0]

        def cast(b: pa.RecordBatch) -> pa.RecordBatch:
            seen[0] += b.num_rows
            if b.schema.names != schema.names:  # the columns reach the workers by position (see write_dataframe)
                b = b.rename_columns(schema.names)
            return (
                b
                if b.schema.equals(schema)
                else pa.Table.from_batches([b]).cast(schema).combine_chunks().to_batches()[0]
            )

        staged: Iterator[pa.RecordBatch] = (cast(b) for b in batches)
        if txn.opts.where is not None:  # a partial overwrite: a row it does not match fails the job, uncommitted
            staged = checked_batches(staged, txn.opts.where)
        seen_parts = _Partitions(txn.partition_columns) if txn.opts.partitions else None
        if seen_parts is not None:
            staged = seen_parts.seen(staged)
        records = txn.stage(txn.observed(staged))
        if counters is not None:
            counters[0].add(seen[0])
            counters[1].add(len(records))
            counters[2].add(sum(int(r.get("size") or 0) for r in records))
        out = pa.RecordBatch.from_pylist(records, schema=txn.record_schema)
        # what this task's rows proved of the time partitions, on each of its file records (see write_dataframe)
        found = txn.observer.encode() if txn.observer is not None else 0
        out = out.append_column(_FOUND, pa.array([found] * out.num_rows, pa.int64()))
        held = seen_parts.encode() if seen_parts is not None else None
        yield out.append_column(_PARTS, pa.array([held] + [None] * (out.num_rows - 1), pa.binary())[: out.num_rows])

    return run


_FOUND = "dal_time_partitions_kept"  # a column _stage adds to the records: the rules its task's rows kept
_PARTS = "dal_partitions_written"  # and one with the distinct partition values its rows hold (Arrow IPC)


class _Partitions:
    """The distinct partition values of the rows a task stages (``overwrite='partitions'``), as the driver
    builds the predicate from: typed, as Arrow holds them (a date stays a date), NULL kept."""

    def __init__(self, parts: tuple[str, ...]) -> None:
        self.parts = list(parts)
        self.tables: list[pa.Table] = []

    def seen(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            if b.num_rows and all(p in b.schema.names for p in self.parts):
                t = pa.Table.from_batches([b]).select(self.parts)
                self.tables.append(t.group_by(self.parts).aggregate([]).select(self.parts))
            yield b

    def encode(self) -> bytes | None:
        if not self.tables:
            return None
        table = pa.concat_tables(self.tables)
        table = table.group_by(self.parts).aggregate([]).select(self.parts)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        return bytes(sink.getvalue().to_pybytes())


def _replaced_partitions(txn: WriteTransaction, schema: pa.Schema, held: list[bytes]) -> None:
    """``overwrite='partitions'`` from Spark: the predicate (``txn.opts.where``) built from the partitions the
    executors staged files for, bound against the written schema, before the commit."""
    from dataclasses import replace

    from dal import expr as E
    from dal.formats.inputs import partitions_of

    parts = list(txn.partition_columns)
    tables = [pa.ipc.open_stream(pa.py_buffer(b)).read_all() for b in held]
    seen = pa.concat_tables(tables) if tables else pa.table({p: pa.array([], schema.field(p).type) for p in parts})
    txn.opts = replace(txn.opts, where=E.bind(partitions_of(seen, parts), schema))


@contextmanager
def _watched(spark: Any) -> Iterator[tuple[Any, Any, Any] | None]:
    """While a Spark write runs: the current progress line follows it (rows, files and bytes from accumulators
    that each task adds to when its files are staged; the running stages' finished tasks for the percentage and
    ETA), polled ``progress.INTERVAL`` apart on a thread. Yields the accumulators, or None when no line is drawn.

    When the session draws Spark's own console progress bar (``spark.ui.showConsoleProgress``, on in sessions
    started from a Python shell or script), dal's line waits until the job is done, then sums it up: two lines
    redrawn in place on one terminal would overwrite each other."""
    bar = progress.current()
    try:
        sc = spark.sparkContext if bar.active else None  # Spark Connect: no context, no accumulators
        counters = (sc.accumulator(0), sc.accumulator(0), sc.accumulator(0)) if sc is not None else None
        console = sc is not None and sc.getConf().get("spark.ui.showConsoleProgress", "false").lower() == "true"
    except Exception:
        sc = counters = None
    if sc is None or counters is None:
        yield None
        return
    stop = threading.Event()

    def poll() -> None:
        tracker = sc.statusTracker()
        while True:
            try:
                total = done = 0
                for stage in tracker.getActiveStageIds():
                    info = tracker.getStageInfo(stage)
                    if info is not None:
                        total, done = total + info.numTasks, done + info.numCompletedTasks
                rows, files, size = (int(c.value) for c in counters)
                bar.update(done=rows, files=files, bytes=size, fraction=done / total if total else None)
            except Exception:  # a stopping context: progress must never fail the write
                return
            if stop.wait(progress.INTERVAL):
                return

    watcher = threading.Thread(target=poll, name="dal-progress", daemon=True)
    bar.held = console
    watcher.start()
    ok = False
    try:
        yield counters
        ok = True
    finally:
        stop.set()
        watcher.join()
        bar.held = False
        rows, files, size = (int(c.value) for c in counters)
        bar.update(done=rows, files=files, bytes=size, fraction=1.0 if ok else None)


def check_frame(df: Any, what: str = "dal.write") -> None:
    """Refuse, before anything runs, a DataFrame that cannot be written as one version: a streaming one.

    Raises:
        DalError: naming the way that works (each micro-batch written as a version by ``foreachBatch``).
    """
    try:
        streaming = bool(df.isStreaming)
    except Exception:  # an unusual DataFrame class: the write says what is wrong with it
        streaming = False
    if streaming:
        raise DalError(
            f"{what} writes a batch DataFrame as one version, and this one is streaming (df.isStreaming); write "
            "each micro-batch as a version instead: df.writeStream.foreachBatch(lambda batch, epoch: "
            "dal.write(batch, NAME)).start()"
        )


def estimated_bytes(df: Any) -> int | None:
    """Spark's estimate of the DataFrame's size in bytes (its optimized plan's statistics); None when Spark has
    none (Spark Connect, or a plan whose estimate is Spark's "unknown": the largest long)."""
    try:
        raw = df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()  # a Scala BigInt (py4j: an int)
        size = int(raw if isinstance(raw, int) else raw.toString())
    except Exception:
        return None
    return size if 0 <= size < 2**63 - 1 else None


def sized(df: Any, target_file_size: int | None) -> Any:
    """``df`` coalesced to ``ceil(estimated bytes / target_file_size)`` partitions when that is fewer than it has
    (each task writes its own files, so 200 tiny partitions would be 200 tiny files); otherwise unchanged.
    A coalesce only merges partitions (no shuffle) and never adds any: a large DataFrame keeps its partitioning."""
    if target_file_size is None:  # not asked: the DataFrame's partitioning, as Spark's own writers keep it
        return df
    size = estimated_bytes(df)
    if size is None:
        return df
    try:
        partitions = int(df.rdd.getNumPartitions())
    except Exception:  # Spark Connect: no RDD
        return df
    wanted = max(1, -(-size // target_file_size))
    return df.coalesce(wanted) if wanted < partitions else df


def write_dataframe(df: Any, fmt: Format, txn: WriteTransaction) -> int:
    """Write a Spark DataFrame as one new storage version through ``txn`` (from ``fmt.begin``); return its number.

    With the format's native Spark writer on the classpath (``Format.spark_source``), Spark writes and commits;
    otherwise the executors stage files (``mapInArrow``) and the driver commits them all as ONE version.
    Raises ``SchemaMismatch`` (naming the column, or the field and the row of the Spark task) before anything
    is committed. With ``opts.target_file_size``, a DataFrame smaller than its partition count times it is
    coalesced first (``sized``).
    """
    location, opts = txn.location, txn.opts
    from dal.spark.frames import prepare, quoted

    df = prepare(df)  # MLlib vectors (dense or sparse) as float arrays of their size; nothing else changes
    df = sized(df, opts.target_file_size)  # few files of about the target size, not one tiny file per partition
    problems = type_problems(df.schema, txn.format_title)  # before anything is written (arrow_schema fails on some)
    if problems:
        raise SchemaMismatch(
            f"cannot write the DataFrame to the {txn.format_title} table {location}: " + "; ".join(problems)
        )
    schema = txn.check(arrow_schema(df))
    if opts.time_column is not None and opts.time_column not in df.columns:
        raise SchemaMismatch(f"time_column {opts.time_column!r} is not a column of the DataFrame")
    src = native_source(df.sparkSession, fmt)
    native = txn.spark_options() if src is not None else None
    if src is not None and native is not None:
        writer = df.write.format(src.name).mode(opts.mode)
        if txn.partition_columns:
            writer = writer.partitionBy(*txn.partition_columns)
        with _watched(df.sparkSession):  # Spark's own writer: the progress line shows its tasks
            writer.options(**native).save(uris.to_uri(location, opts.storage_options))
        if txn.observer is not None and not txn.observer.declared:
            txn.observer.merge([False] * len(txn.observer.rules))  # no row was seen: nothing proven
        return txn.native_commit()
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    group = _JobGroup(df.sparkSession)
    try:
        with _watched(df.sparkSession) as counters, group:  # a progress line on a terminal, per staged file
            # by position: mapInArrow resolves each column by its name, which fails for names with dots or backquotes
            positional = df.select(*(F.col(quoted(n)).alias(f"_{i}") for i, n in enumerate(schema.names)))
            records = txn.record_schema.append(pa.field(_FOUND, pa.int64())).append(pa.field(_PARTS, pa.binary()))
            frame = positional.mapInArrow(_stage(txn, schema, counters), from_arrow_schema(records))
            rows = [r.asDict() for r in frame.collect()]
    except Exception as e:
        group.settle()  # the failed job's other tasks may still be staging files: let them stop first
        txn.abort()
        marker = "SchemaMismatch: "  # raised on an executor: Spark hands back its text
        text = str(e)
        if marker in text:
            raise SchemaMismatch(text.split(marker, 1)[1].splitlines()[0]) from None
        refused = "DalError: where "  # a row a partial overwrite's predicate does not match (check_rows)
        if txn.opts.where is not None and refused in text:
            raise DalError("where " + text.split(refused, 1)[1].splitlines()[0]) from None
        missing = worker_import_error(df.sparkSession, e)
        if missing is not None:
            raise missing from None
        raise
    except BaseException:
        group.settle()
        txn.abort()
        raise
    pause("spark-files-staged")
    held = [bytes(h) for r in rows if (h := r.pop(_PARTS)) is not None]
    if txn.opts.partitions:
        _replaced_partitions(txn, schema, held)
    for r in rows:
        found = r.pop(_FOUND)
        if txn.observer is not None:
            txn.observer.merge(txn.observer.decode(int(found)))
    return txn.commit(rows)


class _JobGroup:
    """The staging job under its own Spark job group, so that a failed write can cancel the job's remaining
    tasks and wait until none runs before removing what they staged (a failed job's other tasks are killed
    asynchronously; one still writing would re-create the version directory after the abort)."""

    KEYS = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")

    def __init__(self, spark: Any) -> None:
        import uuid

        try:
            self.sc = spark.sparkContext
        except Exception:  # Spark Connect: no context; nothing to wait for here
            self.sc = None
        self.id = f"dal-write-{uuid.uuid4().hex}"
        self.saved: dict[str, Any] = {}

    def __enter__(self) -> _JobGroup:
        if self.sc is not None:
            self.saved = {k: self.sc.getLocalProperty(k) for k in self.KEYS}
            self.sc.setJobGroup(self.id, "dal write", interruptOnCancel=True)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.sc is not None:
            for key, value in self.saved.items():
                self.sc.setLocalProperty(key, value)

    def settle(self, timeout: float = 30.0) -> None:
        """Cancel the group's jobs and wait (up to ``timeout`` s) until none of their tasks is running."""
        if self.sc is None:
            return
        import time

        try:
            self.sc.cancelJobGroup(self.id)
            tracker = self.sc.statusTracker()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(self.id)]
                infos = [tracker.getStageInfo(s) for job in jobs if job is not None for s in job.stageIds]
                if not any(i is not None and i.numActiveTasks > 0 for i in infos):
                    break
                time.sleep(0.05)
            time.sleep(0.2)  # a killed task's Python worker may outlive its task by a moment
        except Exception:  # a stopped context: nothing left running
            return
