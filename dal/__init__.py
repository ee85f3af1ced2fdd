"""dal: a versioned data access layer for ML training on Spark-built datasets."""

from dal import errors
from dal.api import get_catalog
from dal.errors import DalError

__version__ = "0.1.0"
__all__ = ["DalError", "__version__", "errors", "get_catalog"]
