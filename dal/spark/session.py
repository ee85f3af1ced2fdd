"""Spark sessions for dal: the session to use, what its JVM can reach (Hadoop connectors, a format's
native data source)."""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Any

from dal.errors import MissingDependency, require
from dal.storage import uris

if TYPE_CHECKING:
    from dal.formats.base import Format, SparkSource


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


# what a Python worker that lacks a package says: a module it could not import, or pyspark's own check
_NO_MODULE = re.compile(r"No module named '([A-Za-z_][\w.]*)'")
_PACKAGE_NOT_FOUND = re.compile(r"(\w+) >= [\w.]+ must be installed; however, it was not found")


def worker_python(spark: Any) -> str:
    """The Python executable Spark's Python workers run: the driver's ``PYSPARK_PYTHON`` when its SparkContext
    started (``spark.pyspark.python`` under spark-submit sets it), else ``python3`` from the workers' PATH."""
    try:
        return str(spark.sparkContext.pythonExec)
    except Exception:  # Spark Connect: the server's workers, not visible here
        return os.environ.get("PYSPARK_PYTHON", "python3")


def worker_import_error(spark: Any, e: BaseException) -> MissingDependency | None:
    """A one-line ``MissingDependency`` for a Spark job that failed because its Python workers cannot import a
    package dal needs there (dal itself, pyarrow, numpy …), naming the Python they run and what to set or
    install; None for any other failure. Spark's own error is a worker traceback inside a Java one."""
    text = str(e)
    found = _NO_MODULE.search(text)
    missing = found.group(1).split(".")[0] if found else None
    if missing is None and (pkg := _PACKAGE_NOT_FOUND.search(text)):
        missing = pkg.group(1).lower()
    if missing is None:
        return None
    python = worker_python(spark)
    package = "dal-catalog" if missing in ("dal", "catalog") else missing
    return MissingDependency(
        f"Spark's Python workers cannot import {missing}: they run {python} (PYSPARK_PYTHON when the SparkContext "
        f"started, else python3 from the executors' PATH); set PYSPARK_PYTHON (spark.pyspark.python with "
        f"spark-submit) to a Python that has dal installed, or install {package} into {python}"
    )


HADOOP_CONNECTORS = {  # by uris.provider; uris.to_uri hands Hadoop the URLs these connectors serve (s3a://, abfss://)
    "aws": "org.apache.hadoop.fs.s3a.S3AFileSystem",
    "azure": "org.apache.hadoop.fs.azurebfs.SecureAzureBlobFileSystem",
    "google": "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem",
}


def hadoop_reaches(spark: Any, location: str) -> bool:
    """Whether Spark's JVM has the Hadoop connector for ``location``'s store (memory:// and others: never)."""
    connector = HADOOP_CONNECTORS.get(uris.provider(location) or "")
    return connector is not None and jvm_has(spark, connector)


def jvm_has(spark: Any, cls: str) -> bool:
    """Whether ``cls`` loads in the session's JVM (False, not an error, when it does not or there is no JVM)."""
    try:
        jvm = spark.sparkContext._jvm
        jvm.java.lang.Class.forName(cls, False, jvm.Thread.currentThread().getContextClassLoader())
        return True
    except Exception:
        return False


def native_source(spark: Any, fmt: Format) -> SparkSource | None:
    """``fmt``'s native Spark data source when its JVM classes are on this session's classpath (never raises;
    Spark Connect sessions have no JVM handle here and get None)."""
    src = fmt.spark_source
    return src if src is not None and jvm_has(spark, src.jvm_class) else None
