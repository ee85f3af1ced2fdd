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
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa

from dal import progress
from dal.api import CatalogLike, get_catalog, open, register
from dal.catalog import VersionInfo, VersionRef
from dal.errors import DalError, DatasetExists, FormatError, is_foreign, one_line, require, translate, translating
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


_HIVE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def hive_type(t: pa.DataType, column: str = "") -> str:
    """The Hive column type of an Arrow type: scalars, ``array``, ``map`` and ``struct`` of them.

    Raises:
        DalError: naming the column (``column``, a path inside nested types) for a type Hive cannot hold.
    """
    where = f"column {column} " if column else ""
    simple = [
        (pa.types.is_int64, "bigint"), (pa.types.is_int32, "int"), (pa.types.is_int16, "smallint"),
        (pa.types.is_int8, "tinyint"), (pa.types.is_float64, "double"), (pa.types.is_float32, "float"),
        (pa.types.is_boolean, "boolean"), (pa.types.is_timestamp, "timestamp"), (pa.types.is_date, "date"),
        (pa.types.is_string, "string"), (pa.types.is_large_string, "string"), (pa.types.is_binary, "binary"),
        (pa.types.is_large_binary, "binary"), (pa.types.is_fixed_size_binary, "binary"),
    ]  # fmt: skip
    for test, name in simple:
        if test(t):
            return name
    if pa.types.is_dictionary(t):
        return hive_type(t.value_type, column)
    if pa.types.is_decimal(t) and t.precision <= 38:
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return f"array<{hive_type(t.value_type, f'{column}[]')}>"
    if pa.types.is_map(t):
        key = hive_type(t.key_type, f"{column}.key")
        if key.startswith(("array<", "map<", "struct<")):
            raise DalError(f"{where}({t}) has a {key} map key; Hive map keys are plain values")
        return f"map<{key},{hive_type(t.item_type, f'{column}.value')}>"
    if pa.types.is_struct(t) and t.num_fields:
        fields = [t.field(i) for i in range(t.num_fields)]
        odd = [f.name for f in fields if not _HIVE_NAME.fullmatch(f.name)]
        if odd:
            raise DalError(f"{where}({t}): Hive struct fields are named with letters, digits and _ only, not {odd}")
        return "struct<" + ",".join(f"{f.name}:{hive_type(f.type, f'{column}.{f.name}')}" for f in fields) + ">"
    raise DalError(f"{where}({t}) has no Hive type")


class HiveSyncError(DalError):
    """Some datasets of a multi-dataset ``sync`` could not be published (the others were): ``synced`` holds the
    tables published, ``failures`` each failed dataset's error."""

    def __init__(self, synced: Sequence[HiveTable], failures: Mapping[str, DalError]) -> None:
        self.synced = list(synced)
        self.failures = dict(failures)
        done = f"synced {len(self.synced)} of {len(self.synced) + len(self.failures)} datasets"
        named = (
            str(e) if str(e).startswith(f"{n} ") or str(e).startswith(f"{n}:") else f"{n}: {e}"
            for n, e in failures.items()
        )
        super().__init__(f"hive sync: {done}; " + "; ".join(named))


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

    Each dataset is checked (its version, its columns' Hive types, its partitions) before the metastore is
    touched, and each is published on its own: one that cannot be does not stop the others.

    Raises:
        DalError: the metastore is unreachable or dropped the connection (nothing more is tried). For one
        dataset asked for by name: its error (a table of that name exists with another schema and was not made
        by dal, a version or column Hive cannot represent — see the module docstring). For several:
        ``HiveSyncError`` after publishing the others, naming each dataset that failed and why (its
        ``synced`` holds the tables published). Nothing in the dal catalog changes either way.
    """
    _address(uri)  # a malformed URI is refused before any dataset is opened
    b = require("hive_metastore_client.builders", "hive")
    cat = get_catalog(catalog)
    single = names is not None and len(names) == 1
    names = list(names) if names else [d.name for d in cat.list_datasets() if d.latest_version is not None]
    plans = []
    failures: dict[str, DalError] = {}
    for name in names:  # everything is checked before the metastore is touched
        try:
            plans.append(_plan(b, name, version, storage_options, cat))
        except Exception as e:
            failures[name] = _dataset_error(name, e)
    out = []
    if plans:
        with _connected(uri) as client:
            for ds, columns, keys, location, partitions in progress.each(plans, "hive sync", unit="tables"):
                try:
                    out.append(_publish(client, b, uri, ds, columns, keys, location, partitions))
                except _ConnectionLost:
                    raise
                except DalError as e:
                    failures[ds.name] = e
    if failures:
        if single:
            raise next(iter(failures.values()))
        raise HiveSyncError(out, failures)
    return out


class _ConnectionLost(DalError):
    """The metastore dropped the connection: no later dataset can be published either."""


def _dataset_error(name: str, e: Exception) -> DalError:
    """``e`` (raised while checking dataset ``name``) as a DalError that names the dataset."""
    if isinstance(e, DalError):
        return e
    if is_foreign(e):
        return translate(e, f"hive sync of {name}")
    raise e  # a bug, not a refusal: seen as is


def _plan(b: Any, name: str, version: VersionRef, storage_options: dict[str, str] | None, cat: Any) -> tuple[Any, ...]:
    """What publishing one dataset needs, checked: its pinned version, Hive columns, location and partitions."""
    ds = open(name, version, storage_options=storage_options, catalog=cat)
    schema = ds.arrow_schema()
    parts = list(ds.version.partition_columns)
    try:
        columns = [b.ColumnBuilder(f.name, hive_type(f.type, f.name)).build() for f in schema if f.name not in parts]
        keys = [b.ColumnBuilder(c, hive_type(schema.field(c).type, c)).build() for c in parts]
    except DalError as e:
        raise DalError(f"{name}: {e}") from None
    location = _table_location(ds)
    return ds, columns, keys, location, _partition_locations(ds)


def _publish(
    client: Any,
    b: Any,
    uri: str,
    ds: Any,
    columns: list[Any],
    keys: list[Any],
    location: str,
    partitions: dict[tuple[str, ...], str],
) -> HiveTable:
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
            for old in client.get_partitions(db, table, -1):  # by their values: the names are escaped
                client.drop_partition(db, table, list(old.values), False)
        built = [
            b.PartitionBuilder(
                values=list(values), db_name=db, table_name=table, sd=_descriptor(b, columns, where)
            ).build()
            for values, where in partitions.items()
        ]
        if built:
            # the thrift call itself: the client library's add_partitions_if_not_exists replaces each location with
            # the table's plus "col=value" (the raw value: wrong for a value that is encoded, and for '')
            client.add_partitions(built)
    except DalError:
        raise
    except Exception as e:  # thrift's MetaException & co.
        if type(e).__name__ == "TTransportException":  # not a refusal: the connection broke
            raise _ConnectionLost(one_line(f"the Hive Metastore at {uri} dropped the connection: {e}")) from e
        raise DalError(_refusal(db, table, location, e)) from e
    return HiveTable(db, table, location, ds.name, ds.number, len(partitions))


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


def _partition_locations(ds: Any) -> dict[tuple[str, ...], str]:
    """Each Hive partition of a version (its values as Hive spells them) and the directory its files are in.

    Hive has no empty partition value: Hive and Spark write '' where nulls go (``__HIVE_DEFAULT_PARTITION__``)
    and read it back as NULL, so rows whose value is '' are published in that partition too (at their own
    directory, ``col=``, when an older writer put them there).

    Raises:
        DalError: one Hive partition's files lie in two directories (a Hive partition reads one), e.g. nulls and
        '' in separate directories; naming the dataset and both directories.
    """
    if not ds.version.partition_columns:
        return {}
    by_values: dict[tuple[str, ...], str] = {}
    for f in ds.files():
        values = tuple(NULL_PARTITION if v is None or v == "" else v for _, v in f.partition_values)
        where = uris.to_uri(f.uri, ds.storage_options).rsplit("/", 1)[0]
        seen = by_values.setdefault(values, where)
        if seen != where:
            blank = any(v == "" for _, v in f.partition_values)
            why = " (null and '' values, which Hive cannot tell apart)" if blank or NULL_PARTITION in values else ""
            raise DalError(
                f"{ds.name} version {ds.number}: the Hive partition {dict(zip(ds.version.partition_columns, values, strict=True))} "
                f"has files in two directories{why}, {uris.mask_url(seen)} and {uris.mask_url(where)}, and a Hive "
                "partition reads one; rewrite the version with dal.write (it writes '' where nulls go)"
            )
    return by_values


@translating("hive import of {qualified} from {uri}")
def import_table(
    qualified: str, *, uri: str, name: str | None = None, catalog: CatalogLike = None, read_only: bool = False
) -> list[VersionInfo]:
    """Register an existing Hive table (a Delta, Petastorm or plain Parquet location) into the catalog, as
    ``dal.register`` does: claiming its location for this catalog, or (``read_only``) reading it without a claim.

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
        read_only=read_only,
    )
