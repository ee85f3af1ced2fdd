"""dal: a versioned data access layer for ML training on Spark-built datasets.

import dal
dal.write(df, "weather.radar", partition_by=["date"])      # a new catalog version
ds = dal.open("weather.radar", version="prod")             # pinned: same rows forever
table = ds.to_arrow()
dal.lifecycle.gc("weather.radar", keep_last=5)                # retention; also drop, rename, set_info, head, stats
dal.read_log()                                                # every (dataset, version, filters) read here
scan.stats()                                                  # rows, bytes, files, pruning, time, cache hits

The public names below load on first use, so ``import dal`` (and the ``dal`` command) costs almost nothing
until something is opened or written.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dal._version import __version__

if TYPE_CHECKING:
    from dal import errors, lineage
    from dal.api import delete, get_catalog, open, register, sync, write
    from dal.convert import convert, infer_schema
    from dal.dataset import Dataset
    from dal.errors import DalError
    from dal.expr import col
    from dal.lineage import read_log
    from dal.mixing import mix
    from dal.ops import hive, lifecycle
    from dal.read.stats import ReadStats
    from dal.read.transform import TransformSpec
    from dal.scan import Scan
    from dal.storage.timeparts import TimePartitions
    from dal.tensors.codecs import CompressedNdarrayCodec, ImageCodec, NdarrayCodec, ScalarCodec
    from dal.tensors.schema import TensorField, TensorSchema

# public name -> (module, attribute or None for the module itself)
_PUBLIC: dict[str, tuple[str, str | None]] = {
    "CompressedNdarrayCodec": ("dal.tensors.codecs", "CompressedNdarrayCodec"),
    "DalError": ("dal.errors", "DalError"),
    "Dataset": ("dal.dataset", "Dataset"),
    "ImageCodec": ("dal.tensors.codecs", "ImageCodec"),
    "NdarrayCodec": ("dal.tensors.codecs", "NdarrayCodec"),
    "ReadStats": ("dal.read.stats", "ReadStats"),
    "ScalarCodec": ("dal.tensors.codecs", "ScalarCodec"),
    "Scan": ("dal.scan", "Scan"),
    "TensorField": ("dal.tensors.schema", "TensorField"),
    "TensorSchema": ("dal.tensors.schema", "TensorSchema"),
    "TimePartitions": ("dal.storage.timeparts", "TimePartitions"),
    "TransformSpec": ("dal.read.transform", "TransformSpec"),
    "col": ("dal.expr", "col"),
    "convert": ("dal.convert", "convert"),
    "delete": ("dal.api", "delete"),
    "errors": ("dal.errors", None),
    "get_catalog": ("dal.api", "get_catalog"),
    "hive": ("dal.ops.hive", None),
    "infer_schema": ("dal.convert", "infer_schema"),
    "lifecycle": ("dal.ops.lifecycle", None),
    "lineage": ("dal.lineage", None),
    "mix": ("dal.mixing", "mix"),
    "open": ("dal.api", "open"),
    "read_log": ("dal.lineage", "read_log"),
    "register": ("dal.api", "register"),
    "sync": ("dal.api", "sync"),
    "write": ("dal.api", "write"),
}

__all__ = [
    "CompressedNdarrayCodec",
    "DalError",
    "Dataset",
    "ImageCodec",
    "NdarrayCodec",
    "ReadStats",
    "ScalarCodec",
    "Scan",
    "TensorField",
    "TensorSchema",
    "TimePartitions",
    "TransformSpec",
    "__version__",
    "col",
    "convert",
    "delete",
    "errors",
    "get_catalog",
    "hive",
    "infer_schema",
    "lifecycle",
    "lineage",
    "mix",
    "open",
    "read_log",
    "register",
    "sync",
    "write",
]


def __getattr__(name: str) -> Any:
    """Load a public name on first use (PEP 562) and keep it as a module attribute."""
    try:
        module, attr = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'dal' has no attribute {name!r}") from None
    loaded = importlib.import_module(module)
    value = getattr(loaded, attr) if attr is not None else loaded
    globals()[name] = value
    # importing a submodule binds it on the package under its own name: where a public function has that name
    # (dal.convert), put the function back, or dal.infer_schema before dal.convert would leave a module there
    short = module.rpartition(".")[2]
    target = _PUBLIC.get(short)
    if globals().get(short) is loaded and target is not None and target[0] == module and target[1] is not None:
        globals()[short] = getattr(loaded, target[1])
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
