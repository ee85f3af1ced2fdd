"""URIs and filesystems: the only module that knows about local paths vs object stores."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import SplitResult, urlsplit

import pyarrow.fs as pafs

from dal.catalog.home import data_dir
from dal.catalog.urls import has_credentials
from dal.catalog.urls import mask_text as mask_text  # re-exported: dal's one masking of URLs in text
from dal.catalog.urls import mask_url as mask_url
from dal.errors import DalError
from dal.validate import check_header_values

ENV_WAREHOUSE = "DAL_WAREHOUSE"
StorageOptions = Mapping[str, str]
AZURE_SCHEMES = ("az", "abfs", "abfss", "azure")
# object stores dal reaches with pyarrow's own clients, by URL scheme -> provider (delta-rs' option prefix)
PROVIDERS = {"s3": "aws", "s3a": "aws", "gs": "google", "gcs": "google", **dict.fromkeys(AZURE_SCHEMES, "azure")}


def provider(uri: str) -> str | None:
    """``aws``, ``azure`` or ``google`` for an object-store URL; None for local paths and other fsspec URLs."""
    return PROVIDERS.get(urlsplit(uri).scheme)


def is_local(uri: str) -> bool:
    scheme = urlsplit(uri).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def normalize(uri: str | os.PathLike[str]) -> str:
    """A canonical location: an absolute local path, or a URL with no trailing slash.

    Raises:
        DalError: the URL carries credentials (they belong in ``storage_options``, never in the catalog).
    """
    if not isinstance(uri, (str, os.PathLike)):
        raise DalError(f"a location must be a path or URL string, not {type(uri).__name__}")
    text = os.fspath(uri)
    if not isinstance(text, str) or not text or "\x00" in text:
        raise DalError(f"invalid location {mask_url(str(text))!r}: expected a non-empty path or URL without NUL")
    try:
        parts = urlsplit(text)
        username, password, hostname = parts.username, parts.password, parts.hostname
    except ValueError as e:  # e.g. an unbalanced '[' in the host
        raise DalError(f"invalid location {mask_url(text)!r}: {e}") from None
    container = parts.scheme in AZURE_SCHEMES and not password  # abfs://container@account.dfs…/path
    if ((username or password) and not container) or has_credentials(text):
        raise DalError(
            f"location {_shown(text, parts.scheme, hostname, parts.path)} contains credentials (a password, or a query "
            "parameter such as password=, secret=, token=, sig=, key=); pass them in storage_options or the "
            "environment instead (dal never stores credentials in the catalog)"
        )
    if is_local(text):
        local = parts.path if parts.scheme == "file" else text
        return str(Path(local).expanduser().resolve())
    return _canonical_url(text, parts)


# spellings of one store's scheme (Hadoop's s3a/s3n are S3); a location is recorded in one spelling, so that one
# table is one location (a catalog refuses a second writable entry of a location, and its claim is one file)
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3"}


def _canonical_url(text: str, parts: SplitResult) -> str:
    """A URL location in one spelling: the scheme lower-case (``s3a``/``s3n`` as ``s3``), ``.`` and ``x/..``
    segments of the path resolved, no trailing slash.

    Raises:
        DalError: a ``..`` that climbs above the bucket (or container).
    """
    scheme = parts.scheme.lower()
    scheme = _SCHEME_ALIASES.get(scheme, scheme)
    path = parts.path
    if path and any(seg in (".", "..") for seg in path.split("/")):
        resolved: list[str] = []
        for seg in path.split("/"):
            if seg == "..":
                if not resolved or resolved == [""]:
                    raise DalError(f"invalid location {mask_url(text)!r}: '..' climbs above the bucket")
                resolved.pop()
            elif seg != ".":
                resolved.append(seg)
        path = "/".join(resolved)
        path = path if path.startswith("/") or not path else "/" + path
    if not scheme:
        return text.rstrip("/")
    rest = (f"?{parts.query}" if parts.query else "") + (f"#{parts.fragment}" if parts.fragment else "")
    return f"{scheme}://{parts.netloc}{path.rstrip('/')}{rest}"


def _shown(text: str, scheme: str, host: str | None, path: str) -> str:
    return f"{scheme}://…@{host or ''}{path}" if "@" in text.partition("?")[0] else mask_url(text)


def join(root: str, *parts: str) -> str:
    if is_local(root):
        return str(Path(root).joinpath(*parts))
    return "/".join([root.rstrip("/"), *(p.strip("/") for p in parts)])


def warehouse_root() -> str:
    """Where new datasets land: ``$DAL_WAREHOUSE`` (a path or an ``s3://`` URL) or ``<data dir>/warehouse``."""
    return normalize(os.environ.get(ENV_WAREHOUSE) or str(data_dir() / "warehouse"))


def default_location(name: str) -> str:
    """``<warehouse>/<dataset name>``; names are validated, so they hold no path separators."""
    return join(warehouse_root(), name)


def _option(options: StorageOptions, *names: str) -> str | None:
    """The first of ``names`` in ``options`` (any case), else in the environment."""
    lowered = {k.lower(): v for k, v in options.items()}
    for n in names:
        if n.lower() in lowered:
            return lowered[n.lower()]
    for n in names:
        if os.environ.get(n.upper()):
            return os.environ[n.upper()]
    return None


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() in ("true", "1", "yes")


def _s3_credentials_found(options: StorageOptions) -> bool:
    """Whether any AWS credential source other than the instance-metadata endpoint is configured."""
    if _option(options, "AWS_ACCESS_KEY_ID", "key", "access_key_id"):
        return True
    env = ("AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
           "AWS_CONTAINER_CREDENTIALS_FULL_URI")  # fmt: skip
    if any(os.environ.get(n) for n in env):
        return True
    shared = os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials"
    return Path(shared).expanduser().is_file()


def _shared_credentials() -> dict[str, str]:
    """The static keys of the AWS profile (``AWS_PROFILE`` or ``default``) in the shared credentials file, for
    delta-rs and obstore: pyarrow's S3 client reads that file, obstore does not (it would ask the instance-metadata
    endpoint after pyarrow uploaded a write's files). Never stored: they live in this process's options only."""
    import configparser

    path = Path(os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials").expanduser()
    parser = configparser.RawConfigParser()
    try:
        if not path.is_file() or not parser.read(path):
            return {}
    except (OSError, configparser.Error):
        return {}
    profile = os.environ.get("AWS_PROFILE") or "default"
    if not parser.has_section(profile):
        return {}
    section = parser[profile]
    names = {"aws_access_key_id": "AWS_ACCESS_KEY_ID", "aws_secret_access_key": "AWS_SECRET_ACCESS_KEY",
             "aws_session_token": "AWS_SESSION_TOKEN"}  # fmt: skip
    out = {upper: section[lower] for lower, upper in names.items() if section.get(lower)}
    return out if {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= out.keys() else {}


def _s3(options: StorageOptions) -> pafs.S3FileSystem:
    endpoint = _option(options, "AWS_ENDPOINT_URL", "AWS_ENDPOINT", "endpoint_url")
    anonymous = _true(_option(options, "AWS_SKIP_SIGNATURE", "aws_skip_signature", "skip_signature"))
    if endpoint and not anonymous and not _s3_credentials_found(options):
        # pyarrow would send unsigned requests (uploading a write's files), then delta-rs/obstore would look for
        # credentials at the cloud instance-metadata endpoint, which an S3-compatible store never serves
        raise DalError(
            f"no S3 credentials for the endpoint {mask_url(endpoint)}: pass AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY in storage_options or the environment, or AWS_SKIP_SIGNATURE=true for a "
            "public bucket (refused before any data was sent)"
        )
    if anonymous:
        return pafs.S3FileSystem(anonymous=True, region=_option(options, "AWS_REGION") or "us-east-1",
                                 **_endpoint_kwargs(endpoint))  # fmt: skip
    kwargs: dict[str, object] = {
        "access_key": _option(options, "AWS_ACCESS_KEY_ID", "key"),
        "secret_key": _option(options, "AWS_SECRET_ACCESS_KEY", "secret"),
        "session_token": _option(options, "AWS_SESSION_TOKEN", "token"),
        "region": _option(options, "AWS_REGION", "AWS_DEFAULT_REGION", "region_name") or "us-east-1",
    }
    kwargs |= _endpoint_kwargs(endpoint)
    return pafs.S3FileSystem(**{k: v for k, v in kwargs.items() if v is not None})


def _endpoint_kwargs(endpoint: str | None) -> dict[str, str]:
    if not endpoint:
        return {}
    parts = urlsplit(endpoint)
    return {"endpoint_override": parts.netloc or parts.path, "scheme": parts.scheme or "https"}


def _azure(uri: str, options: StorageOptions) -> tuple[pafs.FileSystem, str]:
    """pyarrow's Azure client for ``az://container/path`` or ``abfs[s]://container@account.dfs…/path``;
    an ``azure_storage_endpoint`` (e.g. Azurite's ``http://127.0.0.1:10000/devstoreaccount1``) overrides
    the public endpoints."""
    parts = urlsplit(uri)
    container, host = (parts.username, parts.hostname or "") if parts.username else (parts.netloc, "")
    account = _option(options, "AZURE_STORAGE_ACCOUNT_NAME", "azure_storage_account_name", "account_name")
    account = account or (host.split(".", 1)[0] if host else None)
    if not account:
        raise DalError(f"{uri}: no Azure storage account; pass AZURE_STORAGE_ACCOUNT_NAME in storage_options")
    kwargs: dict[str, str] = {"account_name": account}
    key = _option(options, "AZURE_STORAGE_ACCOUNT_KEY", "azure_storage_account_key", "AZURE_STORAGE_ACCESS_KEY")
    sas = _option(options, "AZURE_STORAGE_SAS_KEY", "AZURE_STORAGE_SAS_TOKEN", "sas_token", "sas_key")
    if sas:  # a SAS (one dal serve vended): pyarrow takes one or the other
        kwargs["sas_token"] = "?" + sas.lstrip("?")
    elif key:
        kwargs["account_key"] = key
    endpoint = _option(options, "AZURE_STORAGE_ENDPOINT", "azure_storage_endpoint", "AZURE_ENDPOINT")
    if endpoint:
        ep = urlsplit(endpoint)
        kwargs |= {"blob_storage_authority": ep.netloc, "blob_storage_scheme": ep.scheme or "https",
                   "dfs_storage_authority": ep.netloc, "dfs_storage_scheme": ep.scheme or "https"}  # fmt: skip
    return pafs.AzureFileSystem(**kwargs), f"{container}{parts.path}".rstrip("/")


_GCS_CREDENTIAL_OPTIONS = ("GOOGLE_SERVICE_ACCOUNT", "GOOGLE_SERVICE_ACCOUNT_PATH", "GOOGLE_SERVICE_ACCOUNT_KEY",
                           "GOOGLE_APPLICATION_CREDENTIALS", "SERVICE_ACCOUNT", "SERVICE_ACCOUNT_KEY",
                           "GOOGLE_SKIP_SIGNATURE", "GOOGLE_BASE_URL", "GOOGLE_BEARER_TOKEN")  # fmt: skip
METADATA_PROBE_S = 1.0


def _gcs_metadata_server() -> tuple[str, int]:
    """Where Google's clients look for the instance-metadata server (``GCE_METADATA_HOST``, else the link-local
    address ``metadata.google.internal`` resolves to on Google Cloud)."""
    host = os.environ.get("GCE_METADATA_HOST") or os.environ.get("GCE_METADATA_IP") or "169.254.169.254"
    name, _, port = host.rpartition(":") if host.count(":") == 1 else (host, "", "")
    return name, int(port) if port.isdigit() else 80


def check_credentials(location: str, options: StorageOptions) -> None:
    """Fail fast where an object store has no credential source at all, instead of letting delta-rs/obstore
    retry the instance-metadata endpoint for minutes: for ``gs://``, no service account or token in
    ``options`` or the environment, no application-default credentials file, and no metadata server
    answering within ``METADATA_PROBE_S`` seconds (S3 has its own check in ``_s3``).

    Raises:
        DalError: no credentials can be found (nothing was sent).
    """
    if provider(location) != "google":
        return
    if _option(options, *_GCS_CREDENTIAL_OPTIONS):  # in the options (any case) or the environment
        return
    config = Path(os.environ.get("CLOUDSDK_CONFIG") or "~/.config/gcloud").expanduser()
    if (config / "application_default_credentials.json").is_file():
        return
    host, port = _gcs_metadata_server()
    try:
        socket.create_connection((host, port), timeout=METADATA_PROBE_S).close()
        return  # a metadata server answers: on Google Cloud, its service account is the credential
    except OSError:
        pass
    raise DalError(
        f"no GCS credentials for {mask_url(location)}: pass GOOGLE_SERVICE_ACCOUNT (a key file path) or "
        "GOOGLE_APPLICATION_CREDENTIALS in storage_options or the environment, run `gcloud auth "
        "application-default login`, or GOOGLE_SKIP_SIGNATURE=true for a public bucket (no metadata server "
        f"answered at {host}:{port}; refused before any request was sent)"
    )


def _gcs(options: StorageOptions) -> pafs.FileSystem:
    """pyarrow's GCS client: default Google credentials (``GOOGLE_APPLICATION_CREDENTIALS``, metadata server),
    anonymous with ``google_skip_signature=true``, another endpoint with ``google_base_url`` (delta-rs' keys)."""
    kwargs: dict[str, object] = {}
    if (_option(options, "GOOGLE_SKIP_SIGNATURE", "google_skip_signature") or "").lower() == "true":
        kwargs["anonymous"] = True
    endpoint = _option(options, "GOOGLE_BASE_URL", "google_base_url")
    if endpoint:
        ep = urlsplit(endpoint)
        kwargs |= {"endpoint_override": ep.netloc or ep.path, "scheme": ep.scheme or "https"}
    return pafs.GcsFileSystem(**kwargs)  # type: ignore[arg-type]


def check_vended(options: StorageOptions | None) -> None:
    """Refuse storage credentials a ``dal serve`` pin vended once they have expired (``ReadOptions.expires``),
    before a request is sent with them.

    Raises:
        CredentialsExpired: they expired (the message says to open the dataset again).
    """
    expires = getattr(options, "expires", None)
    if not expires:
        return
    from datetime import UTC, datetime

    from dal.errors import CredentialsExpired

    until = datetime.fromisoformat(expires.replace("Z", "+00:00"))
    if datetime.now(UTC) >= until:
        what = getattr(options, "vended_for", "") or "this dataset"
        raise CredentialsExpired(
            f"the storage credentials dal serve vended for {what} expired at {expires}: open the dataset again "
            "(dal.open) to pin it and receive new ones"
        )


def object_store_options(options: StorageOptions | None) -> dict[str, str] | None:
    """Storage options for Rust's object_store (table libraries such as delta-rs, and obstore): the user's, plus
    what an S3-compatible endpoint needs — HTTP allowed for
    an http:// endpoint, and conditional put (safe concurrent commits, no lock table) unless the caller
    chose a locking mode (``AWS_S3_LOCKING_PROVIDER``, ``AWS_S3_ALLOW_UNSAFE_RENAME``, ``aws_conditional_put``)."""
    check_vended(options)
    out = dict(options or {})
    check_header_values(out)
    if not _option(out, "AWS_ACCESS_KEY_ID", "key", "access_key_id", "aws_skip_signature", "skip_signature"):
        out |= _shared_credentials()  # the Rust clients read no AWS profile; pyarrow's does (it would upload)
    keys = {k.lower() for k in out}
    endpoint = _option(out, "AWS_ENDPOINT_URL", "AWS_ENDPOINT")
    if endpoint and endpoint.startswith("http://") and "aws_allow_http" not in keys:
        out["AWS_ALLOW_HTTP"] = "true"
    azure = _option(out, "AZURE_STORAGE_ENDPOINT", "AZURE_ENDPOINT")
    if azure and azure.startswith("http://") and "azure_allow_http" not in keys:
        out["azure_allow_http"] = "true"
    if not keys & {"aws_s3_locking_provider", "aws_s3_allow_unsafe_rename", "aws_conditional_put"}:
        out["aws_conditional_put"] = "etag"
    return out or None


def filesystem(uri: str, storage_options: StorageOptions | None = None) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem and the path inside it for ``uri``: local, S3, Azure and GCS (pyarrow's own
    clients), or any other fsspec URL (memory://, hdfs://, …) through fsspec.

    Options that carry a file cache (``dal.open(…, cache="local")``: ``dal.storage.rangecache.ReadOptions``) get a
    remote filesystem whose random-access reads go through that cache."""
    check_vended(storage_options)
    fs, path = _filesystem(uri, storage_options)
    cache = getattr(storage_options, "file_cache", None)
    if cache is not None and not is_local(uri):
        fs = cache.wrap(fs, store_name(uri, storage_options or {}))
    return fs, path


def store_name(uri: str, options: StorageOptions) -> str:
    """The storage ``uri`` lives on, for cache keys: its scheme and the endpoint/account the options name
    (never a credential)."""
    endpoint = _option(options, "AWS_ENDPOINT_URL", "AWS_ENDPOINT", "endpoint_url", "AZURE_STORAGE_ENDPOINT",
                       "azure_storage_endpoint", "GOOGLE_BASE_URL", "google_base_url")  # fmt: skip
    account = _option(options, "AZURE_STORAGE_ACCOUNT_NAME", "azure_storage_account_name", "account_name")
    parts = urlsplit(uri)
    host = parts.hostname if parts.scheme in AZURE_SCHEMES else ""
    return f"{parts.scheme}://{mask_url(endpoint) if endpoint else ''}|{account or host or ''}"


def _filesystem(uri: str, storage_options: StorageOptions | None = None) -> tuple[pafs.FileSystem, str]:
    if is_local(uri):
        return pafs.LocalFileSystem(), normalize(uri)
    parts = urlsplit(uri)
    store = provider(uri)
    if store == "aws":
        return _s3(storage_options or {}), f"{parts.netloc}{parts.path}".rstrip("/")
    if store == "azure":
        return _azure(uri, storage_options or {})
    if store == "google":
        return _gcs(storage_options or {}), f"{parts.netloc}{parts.path}".rstrip("/")
    import fsspec

    try:
        fs, path = fsspec.core.url_to_fs(uri, **dict(storage_options or {}))
    except (ValueError, ImportError, TypeError) as e:  # unknown protocol, its package missing, bad options
        raise DalError(f"cannot open {mask_url(uri)}: {mask_text(e)}") from e
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), path


def to_uri(location: str, storage_options: StorageOptions | None = None) -> str:
    """A URL for Spark/Hadoop (and the Hive Metastore): local paths become ``file://`` + the raw path (Hadoop
    does not decode percent-escapes, so ``Path.as_uri()``'s ``%3D`` for ``=`` would name another file);
    ``s3://`` becomes ``s3a://`` (Hadoop's S3 connector; EMR's EMRFS reads both); ``az://container/path``
    becomes ``abfss://container@<account>.dfs.core.windows.net/path`` (Hadoop's ABFS connector)."""
    if is_local(location):
        return url(location)
    parts = urlsplit(location)
    if parts.scheme == "s3":
        return "s3a" + location[2:]
    if parts.scheme in ("az", "azure"):
        account = _option(storage_options or {}, "AZURE_STORAGE_ACCOUNT_NAME", "azure_storage_account_name")
        if account:
            return f"abfss://{parts.netloc}@{account}.dfs.core.windows.net{parts.path}"
    return location


def url(location: str) -> str:
    """The location as a URL for Python readers (petastorm, fsspec): ``file://`` for local paths, else as is."""
    return f"file://{normalize(location)}" if is_local(location) else location
