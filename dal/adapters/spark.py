"""Spark: write DataFrames distributedly into dal formats, and read pinned versions back as DataFrames.

Without the delta-spark JVM classes (they cannot be downloaded here), executors write Parquet files with
pyarrow (``mapInArrow``) and the driver commits them all as ONE Delta version through delta-rs. With the
classes on the classpath (a real cluster, Databricks), delta-spark's own writer and ``versionAsOf`` are used.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dal import io, progress
from dal.errors import DalError, SchemaMismatch, require
from dal.partitions import NULL_PARTITION

if TYPE_CHECKING:
    from dal.formats.base import Format, SparkSource, WriteTransaction
    from dal.plan import Pinned
    from dal.scan import Scan


def get_spark(spark: Any = None, master: str | None = None) -> Any:
    """The given session, else the active one, else a new ``local[*]`` (or ``master``) session."""
    if spark is not None:
        return spark
    sql = require("pyspark.sql", "spark")
    active = sql.SparkSession.getActiveSession()
    if active is not None:
        return active
    master = master or "local[*]"
    builder = sql.SparkSession.builder.master(master).appName("dal").config("spark.sql.session.timeZone", "UTC")
    if master.startswith("local"):
        # local workers must run this interpreter (with dal and pyarrow), not whatever python3 is on PATH;
        # pyspark reads PYSPARK_PYTHON when the context starts (spark.pyspark.python is for spark-submit)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return builder.getOrCreate()


HADOOP_CONNECTORS = {  # by io.provider; io.to_uri hands Hadoop the URLs these connectors serve (s3a://, abfss://)
    "aws": "org.apache.hadoop.fs.s3a.S3AFileSystem",
    "azure": "org.apache.hadoop.fs.azurebfs.SecureAzureBlobFileSystem",
    "google": "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem",
}


def _hadoop_reaches(spark: Any, location: str) -> bool:
    """Whether Spark's JVM has the Hadoop connector for ``location``'s store (memory:// and others: never)."""
    connector = HADOOP_CONNECTORS.get(io.provider(location) or "")
    return connector is not None and _jvm_has(spark, connector)


def _jvm_has(spark: Any, cls: str) -> bool:
    """Whether ``cls`` loads in the session's JVM (False, not an error, when it does not or there is no JVM)."""
    try:
        jvm = spark.sparkContext._jvm
        jvm.java.lang.Class.forName(cls, False, jvm.Thread.currentThread().getContextClassLoader())
        return True
    except Exception:
        return False


def arrow_schema(df: Any) -> pa.Schema:
    """The Arrow schema the executors write ``df`` with: Spark's, timestamps normalised to UTC (nested ones
    too), and fields inside a nullable struct nullable.

    Spark's ``struct<a: bigint not null>`` means "a is set whenever the struct is"; in Arrow, ``a`` is null
    under a null struct, and pyarrow refuses to write a non-nullable column that holds nulls.
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    session_tz = df.sparkSession.conf.get("spark.sql.session.timeZone") or "UTC"
    schema = to_arrow_schema(df.schema, timezone=session_tz)
    return pa.schema([f.with_type(_writable(f.type, f.nullable)) for f in schema])


def _writable(t: pa.DataType, nullable_above: bool) -> pa.DataType:
    if pa.types.is_timestamp(t) and t.tz is not None:
        return pa.timestamp("us", tz="UTC")
    if pa.types.is_struct(t):
        fields = [t.field(i) for i in range(t.num_fields)]
        return pa.struct(
            [f.with_type(_writable(f.type, nullable_above or f.nullable)).with_nullable(f.nullable or nullable_above)
             for f in fields]
        )  # fmt: skip
    if pa.types.is_list(t):
        f = t.value_field
        return pa.list_(f.with_type(_writable(f.type, f.nullable)))
    if pa.types.is_map(t):
        key, item = t.key_field, t.item_field
        return pa.map_(key.with_type(_writable(key.type, False)), item.with_type(_writable(item.type, item.nullable)))
    return t


def type_problems(schema: Any, title: str) -> list[str]:
    """Each column (path) of a Spark schema that a ``title`` table ("Delta") cannot hold, with its type and why."""
    from pyspark.sql import types as T

    stored = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType, T.DecimalType,
              T.StringType, T.BinaryType, T.BooleanType, T.DateType, T.TimestampType, T.TimestampNTZType)  # fmt: skip
    out: list[str] = []

    def walk(path: str, t: Any) -> None:
        if isinstance(t, T.StructType):
            for f in t.fields:
                walk(f"{path}.{f.name}" if path else f.name, f.dataType)
        elif isinstance(t, T.ArrayType):
            walk(f"{path}[]", t.elementType)
        elif isinstance(t, T.MapType):
            walk(f"{path}.key", t.keyType)
            walk(f"{path}.value", t.valueType)
        elif not isinstance(t, stored) or isinstance(t, T.UserDefinedType):
            out.append(f"{path} ({t.simpleString()}): {_why_not(t, title)}")

    walk("", schema)
    return out


def _why_not(t: Any, title: str) -> str:
    from pyspark.sql import types as T

    if isinstance(t, T.UserDefinedType):
        return "a user-defined type; convert it to its SQL type first (e.g. pyspark.ml.functions.vector_to_array)"
    if isinstance(t, T.NullType):
        return "has no type (every value is null); cast it to the type it should have, e.g. F.lit(None).cast('string')"
    if isinstance(t, T.VariantType):
        return f"dal writes no {title} variant columns; store it as a JSON string (F.to_json)"
    if isinstance(t, T.CalendarIntervalType | T.DayTimeIntervalType | T.YearMonthIntervalType):
        return f"{title} has no interval type; store it as a count of a unit (bigint)"
    if type(t).__name__ == "TimeType":
        return f"{title} has no time-of-day type; store it as bigint microseconds or a string"
    return f"{title} has no such type"


def native_source(spark: Any, fmt: Format) -> SparkSource | None:
    """``fmt``'s native Spark data source when its JVM classes are on this session's classpath (never raises;
    Spark Connect sessions have no JVM handle here and get None)."""
    src = fmt.spark_source
    return src if src is not None and _jvm_has(spark, src.jvm_class) else None


def _stage(txn: WriteTransaction, schema: pa.Schema, counters: tuple[Any, Any, Any] | None = None) -> Any:
    """The executors' side of a staged write: cast each batch to ``schema``, stage the files, yield their records
    (adding the task's rows, files and bytes to the ``counters`` accumulators when a progress line is drawn)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        seen = [0]

        def cast(b: pa.RecordBatch) -> pa.RecordBatch:
            seen[0] += b.num_rows
            return (
                b
                if b.schema.equals(schema)
                else pa.Table.from_batches([b]).cast(schema).combine_chunks().to_batches()[0]
            )

        records = txn.stage(txn.observed(cast(b) for b in batches))
        if counters is not None:
            counters[0].add(seen[0])
            counters[1].add(len(records))
            counters[2].add(sum(int(r.get("size") or 0) for r in records))
        out = pa.RecordBatch.from_pylist(records, schema=txn.record_schema)
        # what this task's rows proved of the time partitions, on each of its file records (see write_dataframe)
        found = txn.observer.encode() if txn.observer is not None else 0
        yield out.append_column(_FOUND, pa.array([found] * out.num_rows, pa.int64()))

    return run


_FOUND = "dal_time_partitions_kept"  # a column _stage adds to the records: the rules its task's rows kept


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


def write_dataframe(df: Any, fmt: Format, txn: WriteTransaction) -> int:
    """Write a Spark DataFrame as one new storage version through ``txn`` (from ``fmt.begin``); return its number.

    With the format's native Spark writer on the classpath (``Format.spark_source``), Spark writes and commits;
    otherwise the executors stage files (``mapInArrow``) and the driver commits them all as ONE version.
    Raises ``SchemaMismatch`` (naming the column, or the field and the row of the Spark task) before anything
    is committed.
    """
    location, opts = txn.location, txn.opts
    from dal.adapters.spark_convert import prepare

    df = prepare(df)  # MLlib vectors (dense or sparse) as float arrays of their size; nothing else changes
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
        if opts.partition_by:
            writer = writer.partitionBy(*opts.partition_by)
        with _watched(df.sparkSession):  # Spark's own writer: the progress line shows its tasks
            writer.options(**native).save(io.to_uri(location, opts.storage_options))
        if txn.observer is not None and not txn.observer.declared:
            txn.observer.merge([False] * len(txn.observer.rules))  # no row was seen: nothing proven
        return txn.native_commit()
    from pyspark.sql.pandas.types import from_arrow_schema

    group = _JobGroup(df.sparkSession)
    try:
        with _watched(df.sparkSession) as counters, group:  # a progress line on a terminal, per staged file
            records = txn.record_schema.append(pa.field(_FOUND, pa.int64()))
            frame = df.select(*schema.names).mapInArrow(_stage(txn, schema, counters), from_arrow_schema(records))
            rows = [r.asDict() for r in frame.collect()]
    except Exception as e:
        group.settle()  # the failed job's other tasks may still be staging files: let them stop first
        txn.abort()
        marker = "SchemaMismatch: "  # raised on an executor: Spark hands back its text
        text = str(e)
        if marker in text:
            raise SchemaMismatch(text.split(marker, 1)[1].splitlines()[0]) from None
        raise
    except BaseException:
        group.settle()
        txn.abort()
        raise
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


def scan_to_spark(scan: Scan, spark: Any = None) -> Any:
    """The pinned version in Spark with the scan's filters and window as Spark predicates (so Spark pushes
    them into its Parquet scan) and its projection as a select.

    A sharded scan is read by Spark's executors task by task (``read_tasks``): the DataFrame holds exactly
    the rank's rows, as ``to_arrow`` would. Shuffling orders rows, and a DataFrame has no order: the rows
    are the same either way."""
    spark = get_spark(spark)
    if scan.shard_ is not None or (
        not io.is_local(scan.dataset.location) and not _hadoop_reaches(spark, scan.dataset.location)
    ):
        # sharded, or no Hadoop filesystem for this store (no hadoop-aws here): executors read the planned
        # tasks with pyarrow, applying the projection, filters and the shard's row ranges as they read
        return read_tasks(scan, spark)
    df = read_version(scan.dataset, spark)
    conditions = list(scan.filters)
    if scan.window_ is not None:
        conditions.append(scan._window_expr(scan.window_))
    floating = {f.name for f in scan.arrow_schema if pa.types.is_floating(f.type)}
    ntz = {f.name for f in df.schema.fields if f.dataType.typeName() == "timestamp_ntz"}
    for c in conditions:
        df = df.where(spark_condition(c, floating, ntz))
    if scan.columns is not None:
        df = df.select(*scan.columns)
    return df


def spark_condition(e: Any, floating: set[str], ntz: Collection[str] = ()) -> Any:
    """A bound filter (``dal.expr.bind``) as a Spark Column with the semantics ``to_arrow`` gives it.

    Spark orders NaN above every number and makes NaN = NaN true; dal compares NaN as IEEE 754 does (only
    ``<>`` is true), so comparisons on ``floating`` columns are guarded. Naive datetimes are UTC; compared with a
    ``timestamp_ntz`` column (``ntz``) they are wall-clock literals of that type (a zoned literal would make
    Spark read the column in the session's time zone). A NULL ``isin`` argument is kept out of ``isin`` (NULL
    unless the value matches, as in SQL).
    """
    from datetime import UTC, datetime

    from pyspark.sql import functions as F

    from dal import expr as E
    from dal.plan import as_datetime

    null = F.lit(None).cast("boolean")

    def lit(v: Any, column: str | None = None) -> Any:
        if isinstance(v, datetime) and column in ntz:
            wall = v if v.tzinfo is None else v.astimezone(UTC).replace(tzinfo=None)
            return F.lit(wall.isoformat(sep=" ")).cast("timestamp_ntz")
        return F.lit(as_datetime(v, "a filter value") if isinstance(v, datetime) else v)  # naive = UTC

    def go(e: E.Expr) -> Any:
        if isinstance(e, E.And):
            return go(e.left) & go(e.right)
        if isinstance(e, E.Or):
            return go(e.left) | go(e.right)
        if isinstance(e, E.Not):
            return ~go(e.operand)
        if isinstance(e, E.IsNull):
            return F.col(e.column.name).isNull()
        if isinstance(e, E.Fixed):
            return F.when(F.col(e.column.name).isNull(), null).otherwise(F.lit(e.result))
        if isinstance(e, E.IsIn):
            c = F.col(e.column.name)
            present = [lit(v.value, e.column.name) for v in e.values if v.value is not None]
            term = c.isin(present) if present else F.lit(False)
            if e.column.name in floating:
                term = term & ~F.isnan(c)
            if any(v.value is None for v in e.values):
                term = term | null  # x IN (..., NULL) is NULL unless x matches
            return term
        if isinstance(e, E.Like):  # Spark's LIKE also takes '\' as the escape character
            c = F.col(e.column.name)
            return c.ilike(e.pattern) if e.case_insensitive else c.like(e.pattern)
        if isinstance(e, E.Compare) and isinstance(e.left, E.StrFunc):
            a = (F.lower if e.left.name == "lower" else F.upper)(F.col(e.left.column.name))
            b = lit(e.right.value)  # type: ignore[union-attr]
            return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[e.op]
        if isinstance(e, E.Compare) and isinstance(e.left, E.Col):
            a = F.col(e.left.name)
            b = F.col(e.right.name) if isinstance(e.right, E.Col) else lit(e.right.value, e.left.name)
            term = {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[e.op]
            if isinstance(e.right, E.Col):
                if e.left.name not in floating and e.right.name not in floating:
                    return term
                return (
                    F.when(a.isNull() | b.isNull(), null)
                    .when(F.isnan(a) | F.isnan(b), F.lit(e.op == "!="))
                    .otherwise(term)
                )
            if e.left.name not in floating:
                return term
            # Spark: NaN > 1 is true. And the isnan term keeps Spark from pushing a bare comparison (or its
            # negation) into Parquet statistics, which leave NaN out of min/max.
            return term | F.isnan(a) if e.op == "!=" else term & ~F.isnan(a)
        raise DalError(f"cannot translate {e!r} to Spark")

    return go(e)


def read_version(dataset: Pinned, spark: Any = None) -> Any:
    """A Spark DataFrame of exactly ``dataset``'s pinned version."""
    from dal.formats.base import get_format

    spark = get_spark(spark)
    src = native_source(spark, get_format(dataset.info.format))
    if src is not None:
        reader = spark.read.format(src.name).option(src.version_option, dataset.version.storage_version)
        for k, v in dataset.storage_options.items():
            reader = reader.option(k, v)
        return reader.load(io.to_uri(dataset.location, dataset.storage_options))
    return _read_files(dataset, spark)


def _spark_schema(fields: list[pa.Field], zoned: Collection[str] = ()) -> Any:
    """Spark StructType of Arrow fields: tz-aware timestamps are TimestampType, naive ones (Delta's
    timestamp_ntz, dal's naive = wall-clock UTC) TimestampNTZType, so a session in another time zone shows the
    same wall-clock values; except the ``zoned`` columns (stored as INT96: Spark's instants)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    fields = [
        f.with_type(pa.timestamp(f.type.unit, "UTC"))
        if f.name in zoned and pa.types.is_timestamp(f.type) and f.type.tz is None
        else f
        for f in fields
    ]
    return from_arrow_schema(pa.schema(fields), prefer_timestamp_ntz=True)


def _zoned(dataset: Pinned) -> set[str]:
    """The naive-timestamp columns whose Parquet files store INT96 (Spark's legacy encoding of instants: Spark
    reads them as TimestampType only), from the footer of one data file."""
    naive = {f.name for f in dataset.arrow_schema() if pa.types.is_timestamp(f.type) and f.type.tz is None}
    files = dataset.files() if naive else []
    if not files:
        return set()
    import pyarrow.parquet as pq

    fs, path = io.filesystem(files[0].uri, dataset.storage_options)
    schema = pq.ParquetFile(path, filesystem=fs).schema
    return {
        c.path.split(".")[0] for c in (schema.column(i) for i in range(len(schema))) if c.physical_type == "INT96"
    } & naive


def read_tasks(scan: Scan, spark: Any) -> Any:
    """The scan's planned ReadTasks read by Spark's executors with pyarrow (``mapInArrow``): a distributed
    read of exactly the pinned version that needs no Hadoop filesystem for the storage (e.g. S3 without
    hadoop-aws). The scan's projection and filter are applied as each task is read, and a sliced task
    (a shard's cut of a row group) yields exactly its rows."""

    tasks = scan.plan()
    columns = list(scan.columns) if scan.columns is not None else scan.arrow_schema.names
    out_schema = pa.schema([scan.arrow_schema.field(c) for c in columns])
    rows = [
        (
            t.uri,
            t.row_group,
            json.dumps(t.partition_values),
            t.offset,
            -1 if t.length is None else t.length,
            json.dumps(list(getattr(t, "deleted", ()))),
            bool(getattr(t, "exact", False)),
        )
        for t in tasks
    ]
    payload = (
        scan.dataset.location,
        dict(scan.dataset.storage_options),
        scan.arrow_schema,
        getattr(scan, "_physical", None),
        columns,
        scan.row_filter,
        scan.query.scan_filter,  # widened where Parquet statistics could lose NaN rows (dal.expr.pushdown)
        scan.query.exact_filter,  # then applied to the rows read (None: the scan filter is exact)
        scan.query.scan_columns(),
    )

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from dal import io as dio
        from dal.formats import fragments as frag
        from dal.sharding import slice_rows

        location, options, schema, physical, cols, row_filter, scan_filter, exact_filter, scan_cols = payload

        def refine(read: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for b in read:
                yield b.filter(exact_filter).select(cols)

        fs, _ = dio.filesystem(location, options)
        fmt = frag.parquet_format()
        for batch in batches:
            for uri, rg, values, offset, length, deleted, exact in zip(
                *(batch.column(i).to_pylist() for i in range(7)), strict=True
            ):
                parts = [tuple(v) for v in json.loads(values)]
                path = dio.filesystem(uri, options)[1]
                if exact:  # deletion vectors / column mapping: read whole, then filter
                    table = frag.read_exact(path, fs, rg, schema, physical, parts, json.loads(deleted))  # type: ignore[attr-defined]
                    if row_filter is not None:
                        table = table.filter(row_filter)
                    read: Iterator[pa.RecordBatch] = iter(table.select(cols).to_batches())
                else:
                    fragment = fmt.make_fragment(
                        path,
                        filesystem=fs,
                        partition_expression=frag.partition_expression(parts, schema),
                        row_groups=[rg],
                    )
                    read = fragment.to_batches(schema=schema, columns=scan_cols or cols, filter=scan_filter)
                    if exact_filter is not None:
                        read = refine(read)
                yield from slice_rows(read, offset, None if length < 0 else length)

    task_schema = (
        "uri string, row_group int, partition_values string, offset long, length long, deleted string, exact boolean"
    )
    spark_schema = _spark_schema(list(out_schema), _zoned(scan.dataset))
    if not rows:
        return spark.createDataFrame([], spark_schema)
    frame = spark.createDataFrame(rows, task_schema).repartition(min(len(rows), spark.sparkContext.defaultParallelism))
    return frame.mapInArrow(run, spark_schema)


def _read_files(dataset: Pinned, spark: Any) -> Any:
    from pyspark.sql import functions as F

    from dal.scan import Scan

    files = dataset.files()
    # deletion vectors / column mapping: plain Parquet reads would be wrong; the planned tasks read them exactly
    if any(f.deleted_rows for f in files) or dataset.physical_schema():
        return read_tasks(Scan(dataset), spark)
    arrow = dataset.arrow_schema()
    parts = list(dataset.version.partition_columns)
    zoned = _zoned(dataset)
    data_schema = _spark_schema([f for f in arrow if f.name not in parts], zoned)
    if not files:
        return spark.createDataFrame([], _spark_schema(list(arrow)))
    if parts and all(_hive_path(dataset.location, f.uri, f.partition_values) for f in files):
        # Spark's own partition discovery restores the columns; the full schema fixes their types
        full = _spark_schema([f for f in arrow if f.name not in parts] + [arrow.field(c) for c in parts], zoned)
        so = dataset.storage_options
        frame = spark.read.schema(full).option("basePath", io.to_uri(dataset.location, so))
        return frame.parquet(*(io.to_uri(f.uri, so) for f in files)).select(*arrow.names)
    # otherwise: group files by partition, each group gets its values as literal columns
    groups: dict[tuple[tuple[str, str | None], ...], list[str]] = {}
    for f in files:
        groups.setdefault(f.partition_values, []).append(io.to_uri(f.uri, dataset.storage_options))
    frames = []
    for values, uris in groups.items():
        frame = spark.read.schema(data_schema).parquet(*uris)
        for col, value in values:
            typ = _spark_schema([arrow.field(col)])[col].dataType
            frame = frame.withColumn(col, F.lit(value).cast(typ))
        frames.append(frame)
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out.select(*arrow.names)


_PLAIN = re.compile(r"[A-Za-z0-9_.:-]+")  # fullmatch: '$' would accept a value ending in a newline


def _hive_path(root: str, uri: str, values: tuple[tuple[str, str | None], ...]) -> bool:
    """True when the file sits in plain ``col=value`` directories that Spark's discovery parses back exactly."""
    expected = "/".join(f"{c}={NULL_PARTITION if v is None else v}" for c, v in values)
    plain = all(v is None or _PLAIN.fullmatch(v) for _, v in values)
    return bool(plain) and uri.startswith(io.join(root, expected) + "/")
