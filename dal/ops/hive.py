"""Hive Metastore: publish dal datasets as external tables, and adopt Hive tables into the catalog.

    dal.hive.sync(["weather.radar"], uri="thrift://metastore:9083")    # or: dal hive sync weather.radar --uri …
    dal.hive.import_table("weather.radar", uri="thrift://metastore:9083", name="weather.radar_hive")

A synced table is an EXTERNAL Parquet table whose files are exactly one pinned version: a Petastorm
version directory, a plain Parquet directory, or a Delta table root when that version's files are all the
data files there. (Hive would also read files a later Delta overwrite removed; such versions are refused
rather than published wrong.) Table properties record ``dal.dataset``, ``dal.version`` and ``dal.format``.
Partitions are registered with their directories. The dal catalog is never changed by a sync.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa

from catalog import VersionInfo, VersionRef
from dal import progress
from dal.api import CatalogLike, get_catalog, open, register
from dal.errors import DalError, DatasetExists, FormatError, one_line, require, translating
from dal.formats.registry import detect, format_names, get_format
from dal.storage import uris
from dal.storage.partitions import NULL_PARTITION, hive_partition_type

PARQUET_INPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
PARQUET_OUTPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"

# thrift logs a refused connect at ERROR; with no logging configured Python would print it to stderr next to
# the DalError that says the same (a NullHandler only stops that fallback: configured handlers still get it)
logging.getLogger("thrift").addHandler(logging.NullHandler())


@dataclass(frozen=True)
class HiveTable:
    """What a sync published."""

    database: str
    table: str
    location: str
    dataset: str
    version: int
    partitions: int


def hive_name(dataset: str) -> tuple[str, str]:
    """(database, table) for a dataset: the first dotted part is the database (``default`` if none)."""
    first, _, rest = dataset.partition(".")
    if not rest:
        return "default", first.replace("-", "_").lower()
    return first.replace("-", "_").lower(), rest.replace(".", "_").replace("-", "_").lower()


def hive_type(t: pa.DataType) -> str:
    """The Hive column type of an Arrow type. Raises DalError for types Hive cannot hold."""
    simple = [
        (pa.types.is_int64, "bigint"), (pa.types.is_int32, "int"), (pa.types.is_int16, "smallint"),
        (pa.types.is_int8, "tinyint"), (pa.types.is_float64, "double"), (pa.types.is_float32, "float"),
        (pa.types.is_boolean, "boolean"), (pa.types.is_timestamp, "timestamp"), (pa.types.is_date, "date"),
        (pa.types.is_string, "string"), (pa.types.is_large_string, "string"), (pa.types.is_binary, "binary"),
        (pa.types.is_large_binary, "binary"),
    ]  # fmt: skip
    for test, name in simple:
        if test(t):
            return name
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"array<{hive_type(t.value_type)}>"
    raise DalError(f"Arrow type {t} has no Hive equivalent")


def _address(uri: str) -> tuple[str, int]:
    """(host, port) of a ``thrift://host:port`` URI. Raises DalError for anything else."""
    scheme, host, port = "", None, 9083
    if isinstance(uri, str):
        try:
            parts = urlsplit(uri)
            scheme, host, port = parts.scheme, parts.hostname, parts.port or 9083
        except ValueError:  # a port out of range or not a number, a broken [IPv6] address
            pass
    if scheme != "thrift" or not host:
        raise DalError(f"Hive Metastore URI must look like thrift://host:9083, not {one_line(repr(uri))[:300]}")
    return host, port


def _absent(e: Exception) -> bool:
    """Whether the metastore answered that the table (or database) does not exist."""
    return type(e).__name__ in ("NoSuchObjectException", "UnknownTableException", "UnknownDBException")


def _client(uri: str) -> Any:
    host, port = _address(uri)
    hmc = require("hive_metastore_client", "hive")
    return hmc.HiveMetastoreClient(host, port)


@contextmanager
def _connected(uri: str) -> Iterator[Any]:
    client = _client(uri)
    try:
        client.open()
    except Exception as e:
        raise DalError(one_line(f"cannot reach the Hive Metastore at {uri}: {e or type(e).__name__}")) from e
    try:
        yield client
    finally:
        client.close()


def _table_location(ds: Any) -> str:
    """Where Hive finds exactly this version's files (see the module docstring)."""
    location = get_format(ds.info.format).external_location(ds.location, ds.version, ds.storage_options)
    return uris.to_uri(str(location).removeprefix("file://"), ds.storage_options)


def _descriptor(b: Any, columns: list[Any], location: str) -> Any:
    serde = b.SerDeInfoBuilder(serialization_lib=PARQUET_SERDE).build()
    return b.StorageDescriptorBuilder(
        columns=columns, location=location, input_format=PARQUET_INPUT, output_format=PARQUET_OUTPUT, serde_info=serde
    ).build()


@translating("hive sync to {uri}")
def sync(
    names: Sequence[str] | None = None,
    *,
    uri: str,
    version: VersionRef = None,
    storage_options: dict[str, str] | None = None,
    catalog: CatalogLike = None,
) -> list[HiveTable]:
    """Create or update one external Hive table per dataset (all datasets when ``names`` is None).

    Raises:
        DalError: the metastore is unreachable, a table of that name exists with another schema and was not
        made by dal, or a version cannot be represented (see the module docstring). Nothing in the dal catalog
        changes either way.
    """
    _address(uri)  # a malformed URI is refused before any dataset is opened
    b = require("hive_metastore_client.builders", "hive")
    cat = get_catalog(catalog)
    names = list(names) if names else [d.name for d in cat.list_datasets() if d.latest_version is not None]
    plans = []
    for name in names:  # everything is checked before the metastore is touched
        ds = open(name, version, storage_options=storage_options, catalog=cat)
        schema = ds.arrow_schema()
        parts = list(ds.version.partition_columns)
        columns = [b.ColumnBuilder(f.name, hive_type(f.type)).build() for f in schema if f.name not in parts]
        keys = [b.ColumnBuilder(c, hive_type(schema.field(c).type)).build() for c in parts]
        plans.append((ds, columns, keys, _table_location(ds)))
    out = []
    with _connected(uri) as client:
        for ds, columns, keys, location in progress.each(plans, "hive sync", unit="tables"):
            db, table = hive_name(ds.name)
            try:
                client.create_database_if_not_exists(b.DatabaseBuilder(db).build())
                params = {
                    "EXTERNAL": "TRUE",
                    "dal.dataset": ds.name,
                    "dal.version": str(ds.number),
                    "dal.format": ds.info.format,
                }
                new = b.TableBuilder(
                    table_name=table, db_name=db, storage_descriptor=_descriptor(b, columns, location),
                    partition_keys=keys, parameters=params, table_type="EXTERNAL_TABLE",
                ).build()  # fmt: skip
                try:
                    existing = client.get_table(db, table)
                except Exception as e:
                    if not _absent(e):
                        raise  # a lost connection is not a missing table
                    existing = None
                if existing is None:
                    # not create_external_table: that helper replaces the table's parameters (losing dal's)
                    client.create_table(new)
                else:
                    theirs = [(c.name, c.type) for c in existing.sd.cols] + [
                        (c.name, c.type) for c in existing.partitionKeys or []
                    ]
                    ours = [(c.name, c.type) for c in columns] + [(c.name, c.type) for c in keys]
                    if (existing.parameters or {}).get("dal.dataset") != ds.name and theirs != ours:
                        raise DatasetExists(
                            f"Hive table {db}.{table} exists with another schema ({theirs}) and was not made by dal"
                        )
                    client.alter_table(db, table, new)
                    for values in client.get_partition_names(db, table, -1):
                        client.drop_partition(db, table, [kv.split("=", 1)[1] for kv in values.split("/")], False)
                partitions = _partitions(b, ds, db, table, columns)
                if partitions:
                    client.add_partitions_if_not_exists(db, table, partitions)
            except DalError:
                raise
            except Exception as e:  # thrift's MetaException & co.
                if type(e).__name__ == "TTransportException":  # not a refusal: the connection broke
                    raise DalError(one_line(f"the Hive Metastore at {uri} dropped the connection: {e}")) from e
                raise DalError(_refusal(db, table, location, e)) from e
            out.append(HiveTable(db, table, location, ds.name, ds.number, len(partitions)))
    return out


def _refusal(db: str, table: str, location: str, e: Exception) -> str:
    message = getattr(e, "message", None) or str(e) or type(e).__name__
    text = one_line(f"the Hive Metastore refused {db}.{table} at {location}: {message}")
    if "No FileSystem for scheme" in message or ("ClassNotFoundException" in message and "FileSystem" in message):
        scheme = urlsplit(location).scheme
        text += (
            f" (the metastore needs Hadoop's connector for {scheme}:// on its classpath: hadoop-aws for s3a://, "
            "hadoop-azure for abfss://, the GCS connector for gs://)"
        )
    return text


def _partitions(b: Any, ds: Any, db: str, table: str, columns: list[Any]) -> list[Any]:
    if not ds.version.partition_columns:
        return []
    # each partition's location is the directory its files are in (exact, whatever encoding wrote it)
    by_values: dict[tuple[tuple[str, str | None], ...], str] = {}
    for f in ds.files():
        by_values.setdefault(f.partition_values, uris.to_uri(f.uri, ds.storage_options).rsplit("/", 1)[0])
    return [
        b.PartitionBuilder(
            values=[NULL_PARTITION if v is None else v for _, v in values],
            db_name=db,
            table_name=table,
            sd=_descriptor(b, columns, location),
        ).build()
        for values, location in by_values.items()
    ]


@translating("hive import of {qualified} from {uri}")
def import_table(
    qualified: str, *, uri: str, name: str | None = None, catalog: CatalogLike = None
) -> list[VersionInfo]:
    """Register an existing Hive table (a Delta, Petastorm or plain Parquet location) into the catalog.

    Raises:
        DalError: unreachable metastore or unknown table; FormatError: the location holds no readable data.
    """
    db, _, table = qualified.partition(".") if isinstance(qualified, str) else ("", "", "")
    if not db or not table:
        raise DalError(f"name the table as DB.TABLE, not {one_line(repr(qualified))[:300]}")
    _address(uri)
    with _connected(uri) as client:
        try:
            t = client.get_table(db, table)
        except Exception as e:
            if _absent(e):
                raise DalError(one_line(f"Hive table {qualified} not found at {uri}: {type(e).__name__}")) from e
            message = getattr(e, "message", None) or str(e) or type(e).__name__
            raise DalError(one_line(f"the Hive Metastore at {uri} failed looking up {qualified}: {message}")) from e
    location = t.sd.location
    parts = urlsplit(location)
    local = parts.path if parts.scheme in ("file", "") else location
    fmt = detect(local, {})
    if fmt is None:
        raise FormatError(
            f"Hive table {qualified} at {location} holds no data dal can read (as {', '.join(format_names())})"
        )
    # a plain directory's files do not record the partition columns: Hive's partition keys type them (formats
    # that record their partition types ignore these)
    typed = {k.name: hive_partition_type(k.type or "") for k in t.partitionKeys or []}
    types = {k: str(v) for k, v in typed.items() if v is not None} or None
    return register(
        name or f"{db}.{table}",
        local,
        format=fmt.name,
        description=f"imported from Hive {qualified}",
        partition_types=types,
        catalog=catalog,
    )
