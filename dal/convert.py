"""``dal.convert``: a Spark DataFrame, materialised once, as a pinned ``dal.Dataset`` for training.

The petastorm ``make_spark_converter`` workflow: the DataFrame is written (by ``dal.write``, Spark's
executors writing Parquet, committed as one Delta version) into a cache folder keyed by its plan and the
options, so converting it again is instant; the returned ``Dataset`` has the whole reader API
(``select``, ``filter``, ``shard``, ``shuffle``, ``to_torch``, ``to_tf``, ``iter_batches``…).

Each cache entry has its own small SQLite catalog holding one dataset: the handle is an ordinary pinned
``Dataset``, made by the same ``dal.write`` / ``dal.open`` as any other, and the user's catalog is not
touched (cached conversions are temporary: removed when the last process using them exits, or by
``dal cache clear``). ``name=`` instead writes a permanent version of a dataset in the user's catalog.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from dal import progress
from dal.dataset import Dataset
from dal.errors import DalError
from dal.formats.base import WriteMode
from dal.formats.inputs import is_spark_dataframe
from dal.spark import convert_cache
from dal.tensors.schema import TensorSchema

DEFAULT_ROW_GROUP_BYTES = 32 * 1024 * 1024  # as petastorm's converter
CACHE_DATASET = "dal_cache.converted"
_FORMAT_VERSION = "1"  # bump when the cached layout changes: old entries are then not reused


def convert(
    df: Any,
    *,
    name: str | None = None,
    mode: WriteMode = "overwrite",
    cache_dir: str | None = None,
    dtype: str | None = "float32",
    row_group_size_bytes: int | None = DEFAULT_ROW_GROUP_BYTES,
    compression: str = "snappy",
    catalog: Any = None,
    storage_options: Mapping[str, str] | None = None,
    inputs: Sequence[Any] | None = None,
) -> Dataset:
    """Materialise the Spark DataFrame ``df`` once and return it as a pinned Dataset.

    - MLlib vectors (dense or sparse) become float arrays of their size; with ``dtype='float32'`` (the
      default, as petastorm) every double column (scalars and arrays) is stored as float, ``'float64'``
      stores floats as double, ``None`` keeps each column's type.
    - ``row_group_size_bytes``: about this much uncompressed data per Parquet row group (``None``: Spark's
      Arrow batch size decides).
    - ``compression``: the Parquet codec (petastorm's ``compression_codec``): snappy (default), gzip, zstd,
      lz4, brotli or none.
    - The cache folder is ``cache_dir``, else Spark conf ``spark.dal.cacheDir``, else ``$DAL_CACHE_DIR``,
      else ``<DAL_HOME>/cache``: a local folder or an object-store URL (``s3://bucket/cache``, gs://, az://,
      reached with ``storage_options``), which machines that reach it share. Converting the same DataFrame (same plan, same options) again reuses the
      entry, also from another process when the plan reads files or ranges (not in-memory data).
    - ``name=``: write a new version of the dataset ``name`` in the (default or given) catalog instead —
      permanent and versioned like any ``dal.write``; ``storage_options`` apply to that write, and ``inputs``
      (as ``dal.write``'s) are its declared lineage. A cached conversion records no lineage and does not
      count as the process's previous write.
      ``mode='overwrite'`` (the default) makes that version hold exactly ``df``'s rows, so running the same
      job twice gives the same data (the version before stays readable by its number); ``mode='append'`` adds
      ``df``'s rows to the latest version's (running it twice stores them twice).

    Args:
        df: The Spark DataFrame.
        name: Catalog name to record it as (default: a cache-only conversion).
        mode: ``overwrite`` or ``append`` (as ``dal.write``).
        cache_dir: Cache folder or object-store URL (default ``$DAL_CACHE_DIR``).
        dtype: Float type that floating columns are cast to (None: kept).
        row_group_size_bytes: Target Parquet row-group size.
        compression: Parquet codec.
        catalog: A catalog URL or Catalog (default: ``$DAL_CATALOG_URL`` or the embedded SQLite catalog).
        storage_options: Credentials and options for the object store (as delta-rs/fsspec take them).
        inputs: Upstream datasets to record as lineage.

    Raises:
        DalError: not a Spark DataFrame, a bad option, or a cache folder that cannot be used; anything
        ``dal.write`` raises (e.g. ``SchemaMismatch`` for a column Delta cannot hold).
    """
    if not is_spark_dataframe(df):
        raise DalError(f"dal.convert takes a Spark DataFrame, not {type(df).__name__}")
    if mode not in ("append", "overwrite"):
        raise DalError(f"mode must be 'append' or 'overwrite', not {mode!r}")
    if mode != "overwrite" and name is None:
        raise DalError("mode= applies to name= writes; a cached conversion always holds exactly the DataFrame")
    from dal.spark.write import check_frame

    check_frame(df, "dal.convert")
    if dtype not in (None, "float32", "float64"):
        raise DalError(f"dtype must be 'float32', 'float64' or None, not {dtype!r}")
    if row_group_size_bytes is not None and (
        isinstance(row_group_size_bytes, bool) or not isinstance(row_group_size_bytes, int) or row_group_size_bytes < 1
    ):
        raise DalError(f"row_group_size_bytes must be a positive int or None, not {row_group_size_bytes!r}")
    from dal.formats.base import check_compression

    codec = check_compression(compression)
    from dal import api
    from dal.spark import frames as sc

    prepared = sc.prepare(df, dtype)  # type: ignore[arg-type]  # checked above
    if name is not None:
        with sc.batch_rows(df.sparkSession, _rows(sc, prepared, row_group_size_bytes)):
            version = api.write(prepared, name, mode=mode, compression=codec, storage_options=storage_options,
                                catalog=catalog, inputs=inputs)  # fmt: skip
        return api.open(name, version.number, storage_options=storage_options, catalog=catalog)
    if inputs is not None:
        raise DalError("inputs= records the lineage of a dataset in the catalog: pass name= too")
    spec = convert_cache.cache_spec(cache_dir, sc.cache_dir_conf(df))
    remote = convert_cache.is_remote(spec)
    if storage_options and not remote:
        raise DalError("storage_options apply to name= writes and to a cache on object storage; this cache is local")
    location = convert_cache.remote_root(spec, storage_options) if remote else None
    root = convert_cache.cache_root(spec) if location is None else None
    options = json.dumps(
        {"dtype": dtype, "row_group_size_bytes": row_group_size_bytes, "compression": codec, "v": _FORMAT_VERSION}
    )
    key = hashlib.sha256(f"{sc.plan_key(df)}\0{options}".encode()).hexdigest()[:40]
    if location is not None:
        return _convert_remote(sc, prepared, df, location, key, codec, row_group_size_bytes)
    assert root is not None
    entry = convert_cache.lookup(root, key)
    if entry is None:
        folder = convert_cache.begin(root, key)
        try:
            from dal.catalog import Catalog

            cat = Catalog(f"sqlite:///{folder / 'catalog.db'}")
            with (
                sc.batch_rows(df.sparkSession, _rows(sc, prepared, row_group_size_bytes)),
                progress.task("converting the DataFrame", absorb=True),  # dal.write's progress line, renamed
            ):
                version = api.write(prepared, CACHE_DATASET, path=str(folder / "table"), compression=codec, catalog=cat,
                                    inputs=[], track=False)  # fmt: skip
            cat.close()
            entry = convert_cache.publish(root, key, folder, version.row_count)
        except BaseException:
            convert_cache.discard(folder)
            raise
    from dal.catalog import Catalog

    cat = Catalog(entry.catalog_url, create=False)
    try:
        return api.open(CACHE_DATASET, catalog=cat)
    finally:
        cat.close()  # the Dataset needs no catalog to read


def _convert_remote(
    sc: Any, prepared: Any, df: Any, root: Any, key: str, codec: str, row_group_size_bytes: int | None
) -> Dataset:
    """The conversion cached on object storage (``dal.spark.convert_cache.remote_*``): the table is written there by
    Spark's executors; a private temporary catalog records it (written, or registered when reused)."""
    import shutil
    import tempfile

    from dal import api
    from dal.catalog import Catalog

    options = dict(root.storage_options)
    scratch = tempfile.mkdtemp(prefix="dal-convert-")
    try:
        cat = Catalog(f"sqlite:///{scratch}/catalog.db")
        try:
            entry = convert_cache.remote_lookup(root, key)
            if entry is None:
                folder = convert_cache.remote_begin(root, key)
                try:
                    with sc.batch_rows(df.sparkSession, _rows(sc, prepared, row_group_size_bytes)):
                        version = api.write(prepared, CACHE_DATASET, path=root.child(f"{folder}/table"),
                                            compression=codec, storage_options=options, catalog=cat, inputs=[],
                                            track=False)  # fmt: skip
                    entry = convert_cache.remote_publish(root, key, folder, version.row_count)
                except BaseException:
                    convert_cache.remote_discard(root, folder)
                    raise
                if entry.folder != folder:  # another process published first: read theirs
                    cat.delete_dataset(CACHE_DATASET)
            if not cat.list_datasets(CACHE_DATASET):  # another process's conversion: read it, never claim it
                api.register(CACHE_DATASET, entry.table, storage_options=options, catalog=cat, read_only=True)
            return api.open(CACHE_DATASET, storage_options=options, catalog=cat)
        finally:
            cat.close()  # the Dataset needs no catalog to read
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _rows(sc: Any, df: Any, row_group_bytes: int | None) -> int | None:
    return None if row_group_bytes is None else int(sc.rows_per_row_group(df, row_group_bytes))


def infer_schema(
    df: Any, *, name: str = "Schema", shapes: Mapping[str, tuple[int | None, ...]] | None = None
) -> TensorSchema:
    """The TensorSchema ``dal.write(df, ..., format='petastorm')`` infers for a new dataset from a Spark
    DataFrame, as petastorm's converter does: scalar columns get a ScalarCodec, MLlib vectors and numeric
    arrays an NdarrayCodec with the shape in ``shapes`` or the one found in the data (``None`` for a
    dimension whose length varies). Pass the result (edited, e.g. images given an ImageCodec) as ``schema=``.

    Args:
        df: A Spark DataFrame.
        name: The schema's name.
        shapes: Tensor shapes by column (None for a free dimension).

    Raises:
        SchemaMismatch: a column no codec holds (structs, maps, arrays of strings), or a bad ``shapes``.
    """
    if not is_spark_dataframe(df):
        raise DalError(f"infer_schema takes a Spark DataFrame, not {type(df).__name__}")
    from dal.spark.frames import infer_tensor_schema

    return infer_tensor_schema(df, name, shapes)
