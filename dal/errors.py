"""dal's error hierarchy: the catalog's errors plus those of reading and writing data.

DalError
├── CatalogError ⊃ InvalidName, NotFound ⊃ {DatasetNotFound, VersionNotFound, LabelNotFound}, DatasetExists, TagExists,
│                  VersionConflict, CatalogUnavailable, CatalogReadOnly, CatalogOutOfDate,
│                  CommittedNotRecorded
├── FormatError ⊃ SchemaMismatch, UnsupportedFeature
├── FilterError
├── MissingDependency
├── NotOwned ⊃ ClaimedElsewhere
├── ReadOnlyDataset
├── PurgeUnfinished
├── WriteConflict
└── ChangesUnavailable
"""

from __future__ import annotations

import functools
import inspect
import operator
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from dal.catalog.errors import (
    CatalogError,
    CatalogOutOfDate,
    CatalogReadOnly,
    CatalogUnavailable,
    CommittedNotRecorded,
    DalError,
    DatasetExists,
    DatasetNotFound,
    InvalidName,
    LabelNotFound,
    NotFound,
    TagExists,
    VersionConflict,
    VersionNotFound,
)
from dal.catalog.urls import mask_text


class FormatError(DalError):
    """Data on storage is missing, malformed, or not what the catalog says it is."""


class SchemaMismatch(FormatError, ValueError):
    """Data to write does not fit the dataset's schema; nothing was written."""


class UnsupportedFeature(FormatError):
    """The table uses a storage feature this read path cannot honour (it refuses instead of reading wrong rows)."""


class FilterError(DalError, ValueError):
    """A filter, projection or window refers to unknown columns, mismatched types, or is malformed."""


class MissingDependency(DalError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


class NotOwned(DalError):
    """A destructive operation was pointed at something dal cannot prove it made (a folder without dal's cache
    sentinel, an entry dal did not write); nothing was deleted."""


class ClaimedElsewhere(NotOwned):
    """The dataset's location belongs to another catalog (``dal.storage.claims``): only that catalog may write or
    delete there; nothing was written or deleted."""


class ReadOnlyDataset(DalError):
    """The dataset was registered read-only in this catalog: it can be read, never written, optimized, gc'd or
    purged from here."""


class PurgeUnfinished(DalError):
    """A purge of the dataset's location was stopped half-way: nothing may be written there until it is finished."""


class WriteConflict(DalError):
    """Another writer committed after the version this operation read (an overwrite, a compaction): nothing was
    committed; run it again on the new version."""


class CredentialsExpired(DalError):
    """The short-lived storage credentials a ``dal serve`` pin vended have expired: open the dataset again
    (``dal.open``) to pin it and receive new ones."""


class ChangesUnavailable(DalError):
    """What changed between two versions cannot be told exactly (a version in the range expired or its files
    reclaimed, a commit the log no longer holds); nothing is returned rather than a partial answer."""


# Extras that name no distribution: several install the same import package (tensorflow/ from tensorflow or
# tensorflow-cpu; cv2/ from opencv-python or opencv-python-headless), and two of them overwrite each other, so
# the application picks one. What to install instead of the (empty) extra:
VARIANTS = {
    "tf": "pip install tensorflow (or tensorflow-cpu, or tensorflow[and-cuda]: one of them, never two)",
    "images": "pip install opencv-python-headless (servers) or opencv-python (desktops): one of them, never two",
}


def require(module: str, extra: str) -> Any:
    """Import an optional module.

    Args:
        module: the module to import (``"pandas"``, ``"deltalake"``).
        extra: the ``dal-catalog`` extra that installs it, named in the error (for an extra of ``VARIANTS``,
            which installs nothing, the variants to choose from).

    Raises:
        MissingDependency: the module is not installed (the pip command to run), or it is installed but fails
            to import (what failed: a missing module it needs, a shared library that does not load).
    """
    import importlib

    install = VARIANTS.get(extra, f"pip install 'dal-catalog[{extra}]'")
    # a variant's distribution is not named after its module (tensorflow-cpu): reinstall the one in use
    repair = "reinstall the one installed" if extra in VARIANTS else f"e.g. pip install --force-reinstall {module}, or"
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        missing = e.name or ""
        if missing and (module == missing or module.startswith(missing + ".")):  # the package itself is absent
            raise MissingDependency(f"{module} is needed for this; install it with: {install}") from e
        raise MissingDependency(
            f"{module} is installed but cannot be imported: it needs {missing or 'a module'} ({one_line(e)}); "
            f"repair the installation, e.g. {install}"
        ) from e
    except ImportError as e:  # installed, but it (or a shared library it loads) fails to load
        raise MissingDependency(
            f"{module} is installed but fails to load: {one_line(e)}; repair the installation ({repair} {install})"
        ) from e


def check_int(value: object, what: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as an int (a bool, float or string is refused, a NumPy integer accepted) within the bounds,
    else ``FilterError`` naming the argument."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise FilterError(f"{what} must be an integer, not {type(value).__name__} {one_line(repr(value))[:80]}")
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):  # a NumPy array has __index__ but refuses unless it is one integer
        raise FilterError(
            f"{what} must be an integer, not {type(value).__name__} {one_line(repr(value))[:80]}"
        ) from None
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        bounds = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise FilterError(f"{what} must be {bounds}, not {number if abs(number) < 10**30 else 'a huge number'}")
    return number


# -- foreign errors (pyarrow, delta-rs, obstore, the OS) as one clean line ------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# where Rust's RUST_BACKTRACE=1 output (or a Python traceback pasted into a message) begins
_BACKTRACE = re.compile(r"\n\s*(?:Stack backtrace:|stack backtrace:|Backtrace:|Traceback \(most recent)")
FOREIGN_MODULES = (
    "pyarrow",
    "deltalake",
    "_internal",
    "obstore",
    "fsspec",
    "botocore",
    "s3fs",
    "adlfs",
    "gcsfs",
    "thrift",
)
MAX_MESSAGE = 2000


def one_line(text: object) -> str:
    """``text`` fit for one terminal line: no backtrace, no ANSI colours or other control characters
    (escaped as ``\\xNN``), whitespace runs (newlines included) collapsed, credentials in URLs masked."""
    message = str(text)
    found = _BACKTRACE.search(message)
    if found:
        message = message[: found.start()]
    message = printable(" ".join(_ANSI.sub("", message).split()))
    message = mask_text(message)
    return message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE] + "…"


def printable(text: object) -> str:
    """``text`` with every character a terminal would act on or hide (ESC and other controls, newlines,
    bidi overrides, zero-width characters) written as a visible ``\\xNN`` / ``\\uNNNN`` escape."""
    return "".join(c if c.isprintable() else _escape_char(c) for c in str(text))


def _escape_char(c: str) -> str:
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


# words an object store's error carries (object_store's "Generic S3 error", botocore, Azure and GCS clients);
# an error without them (delta-rs's "Generic error: Partition column(s) not found") is not about storage
_OBJECT_STORE = re.compile(
    r"\b(s3|aws|azure|blob|gcs|google|gs|bucket|container|endpoint|http|https|credentials?|object[ _]store)\b",
    re.IGNORECASE,
)


def storage_hint(message: str) -> str:
    """What to check for an object-store error that does not say (credentials, bucket, endpoint); "" for an
    error that is not an object store's (a local path, a refused schema)."""
    text = message.lower()
    if "169.254.169.254" in text or "instance metadata" in text or "imds" in text or "no credentials" in text:
        return (
            "no credentials were found (dal looked as far as the cloud instance-metadata endpoint): pass "
            "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (or the Azure/GCS equivalents) in storage_options or the "
            "environment, or AWS_SKIP_SIGNATURE=true for a public bucket"
        )
    if "nosuchbucket" in text or "bucket does not exist" in text or "containernotfound" in text:
        return "the bucket does not exist at this endpoint: check the URL, the region and AWS_ENDPOINT_URL"
    if not _OBJECT_STORE.search(message):
        return ""
    if "accessdenied" in text or re.search(r"\b403\b", text) or "forbidden" in text or "invalidaccesskeyid" in text:
        return "access denied: check the credentials and that they may read/write this bucket and path"
    unreachable = ("connection refused", "dns error", "error sending request", "timed out", "could not connect",
                   "network_connection", "couldn't resolve host", "curlcode")  # fmt: skip
    if any(u in text for u in unreachable):
        return "the object store cannot be reached: check AWS_ENDPOINT_URL (or the Azure/GCS endpoint) and the network"
    if re.search(r"generic (s3|microsoftazure|azure|gcs|http) error", text):
        return "check the credentials (storage_options or the environment), the bucket name, region and endpoint"
    return ""


def is_foreign(e: BaseException) -> bool:
    """An error from a library dal calls (or the OS), to be reported as a ``FormatError``."""
    if isinstance(e, DalError):
        return False
    module = type(e).__module__ or ""
    return isinstance(e, OSError) or module.split(".")[0] in FOREIGN_MODULES


def is_panic(e: BaseException) -> bool:
    """A Rust panic surfacing through pyo3 (``pyo3_runtime.PanicException``, a ``BaseException``)."""
    return type(e).__name__ == "PanicException" and (type(e).__module__ or "").startswith("pyo3")


def translate_panic(what: str) -> DalError:
    """The ``DalError`` for a Rust panic while doing ``what``: the panic's own text is not shown (it can quote
    a credential, and is not a message for users)."""
    return FormatError(
        f"{one_line(what)} failed: the Rust storage library stopped on an internal "
        "error; check storage_options and the AWS_/AZURE_/GOOGLE_ environment for malformed values, and run with "
        "DAL_DEBUG=1 to see the library's message"
    )


def translate(e: BaseException, what: str, *, local: bool = False) -> DalError:
    """A ``FormatError`` for a foreign error while doing ``what`` (e.g. ``"reading weather.radar version 3"``):
    one line, credentials masked, with a hint for object-store errors that give none (never when ``local``:
    the data is on local disk)."""
    message = one_line(f"{type(e).__name__}: {e}" if not str(e) else e)
    hint = "" if local else storage_hint(str(e))
    return FormatError(f"{one_line(what)} failed: {message}" + (f" (hint: {hint})" if hint else ""))


@contextmanager
def translated(what: str) -> Iterator[None]:
    """Turn foreign errors (pyarrow, delta-rs, obstore, OSError) raised inside into ``FormatError``."""
    try:
        yield
    except Exception as e:
        if is_foreign(e):
            raise translate(e, what) from e
        raise
    except BaseException as e:  # a pyo3 PanicException is not an Exception
        if is_panic(e):
            raise translate_panic(what) from e
        raise


P = ParamSpec("P")
R = TypeVar("R")


def translating(what: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator form of ``translated``; ``what`` may name the call's arguments (``"writing {name}"``).
    Generator functions are translated while they are iterated."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(fn)

        def describe(args: Any, kwargs: Any) -> str:
            try:
                bound = signature.bind(*args, **kwargs)
                return what.format(**bound.arguments)[:500]
            except Exception:  # a hostile argument must not hide the real error
                return what

        if inspect.isgeneratorfunction(fn):

            @functools.wraps(fn)
            def gen(*args: P.args, **kwargs: P.kwargs) -> Any:
                try:
                    yield from fn(*args, **kwargs)  # type: ignore[misc]
                except Exception as e:
                    if is_foreign(e):
                        raise translate(e, describe(args, kwargs)) from e
                    raise
                except BaseException as e:  # a pyo3 PanicException is not an Exception
                    if is_panic(e):
                        raise translate_panic(describe(args, kwargs)) from e
                    raise

            return gen  # type: ignore[return-value]

        @functools.wraps(fn)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return fn(*args, **kwargs)
            except Exception as e:
                if is_foreign(e):
                    raise translate(e, describe(args, kwargs)) from e
                raise
            except BaseException as e:  # a pyo3 PanicException is not an Exception
                if is_panic(e):
                    raise translate_panic(describe(args, kwargs)) from e
                raise

        return call

    return wrap


__all__ = [
    "CatalogError",
    "CatalogOutOfDate",
    "CatalogReadOnly",
    "CatalogUnavailable",
    "ChangesUnavailable",
    "ClaimedElsewhere",
    "CommittedNotRecorded",
    "DalError",
    "DatasetExists",
    "DatasetNotFound",
    "FilterError",
    "FormatError",
    "InvalidName",
    "LabelNotFound",
    "MissingDependency",
    "NotFound",
    "NotOwned",
    "PurgeUnfinished",
    "ReadOnlyDataset",
    "SchemaMismatch",
    "TagExists",
    "UnsupportedFeature",
    "VersionConflict",
    "VersionNotFound",
    "WriteConflict",
    "check_int",
    "is_panic",
    "one_line",
    "printable",
    "require",
    "storage_hint",
    "translate",
    "translate_panic",
    "translated",
    "translating",
]
