"""dal: a versioned data access layer for ML training on Spark-built datasets.

import dal
dal.write(df, "weather.radar", partition_by=["date"])      # a new catalog version
ds = dal.open("weather.radar", version="prod")             # pinned: same rows forever
table = ds.to_arrow()
dal.lifecycle.gc("weather.radar", keep_last=5)                # retention; also drop, rename, set_info, head, stats
dal.read_log()                                                # every (dataset, version, filters) read here
"""

from dal import errors, hive, lifecycle, lineage
from dal.api import get_catalog, open, register, sync, write
from dal.codecs import CompressedNdarrayCodec, ImageCodec, NdarrayCodec, ScalarCodec
from dal.convert import convert, infer_schema
from dal.dataset import Dataset
from dal.errors import DalError
from dal.expr import col
from dal.lineage import read_log
from dal.mixing import mix as mix  # dal.mix([...], weights=[...])
from dal.scan import Scan
from dal.tensors import TensorField, TensorSchema
from dal.timeparts import TimePartitions
from dal.transform import TransformSpec

__version__ = "0.1.0"
__all__ = [
    "CompressedNdarrayCodec",
    "DalError",
    "Dataset",
    "ImageCodec",
    "NdarrayCodec",
    "ScalarCodec",
    "Scan",
    "TensorField",
    "TensorSchema",
    "TimePartitions",
    "TransformSpec",
    "__version__",
    "col",
    "convert",
    "errors",
    "get_catalog",
    "hive",
    "infer_schema",
    "lifecycle",
    "lineage",
    "open",
    "read_log",
    "register",
    "sync",
    "write",
]
