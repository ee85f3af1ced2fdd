"""``dal serve``: the catalog as a service, a versioned JSON API behind principals, tokens and grants
(``pip install 'dal-catalog[ui]'``: Starlette on uvicorn).

Clients set ``DAL_CATALOG_URL=https://host:port`` and ``DAL_TOKEN`` (``dal.catalog.remote``). Plain HTTP is
refused unless the server listens on loopback only; beyond it, give a certificate and key (``--tls-cert``,
``--tls-key``).
"""

from __future__ import annotations

from dal.errors import DalError, require
from dal.listen import check_can_listen, is_loopback

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8766


def _check_tls(cert: str, key: str) -> None:
    """A certificate and key that do not load (not PEM, not a pair) are one line before anything starts."""
    import ssl

    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as e:
        raise DalError(f"dal serve: cannot use --tls-cert {cert} with --tls-key {key}: {e}") from None


def serve(
    url: str,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    audit_retention_days: float | None = 365.0,
    storage_credentials: str | None = None,
    forbid_local_datasets: bool = False,
    allowed_hosts: tuple[str, ...] = (),
    header_timeout: float | None = None,
    body_timeout: float | None = None,
    max_connections: int | None = None,
) -> None:
    """Serve the catalog at ``url`` on ``host:port`` until interrupted.

    Requests must name ``host`` (or a loopback name, or one of ``allowed_hosts``; ``*``: any) in their ``Host``
    header; listening on every address (``0.0.0.0``, ``::``) without ``allowed_hosts`` allows any.

    Args:
        url: The catalog's database URL.
        host: The address to listen on.
        port: The port.
        tls_cert: The TLS certificate (PEM); needed beyond loopback.
        tls_key: Its private key (PEM).
        audit_retention_days: Drop audit rows older than this (None: keep them all).
        storage_credentials: The JSON file of the server's storage credentials to vend from
            (``dal.serve.vending``; None: ``$DAL_SERVE_STORAGE_CREDENTIALS``, else nothing is vended).
        forbid_local_datasets: Refuse pins of datasets on local paths (they cannot be vended).
        allowed_hosts: Host names clients reach the server by, besides ``host`` and loopback (``*``: any).
        header_timeout: Seconds a connection has to send each request head (None: ``slow.HEADER_TIMEOUT_S``).
        body_timeout: Seconds a request has to send its body (None: ``slow.BODY_TIMEOUT_S``).
        max_connections: Open connections beyond which a request is answered 503 (None: ``slow.MAX_CONNECTIONS``).

    Raises:
        DalError: plain HTTP beyond loopback, half a TLS pair, a port that is taken; MissingDependency without
            the ``ui`` extra; CatalogOutOfDate / CatalogUnavailable for the catalog; StorageCredentialsError for
            an unusable storage credentials file.
    """
    for module in ("starlette", "jinja2", "uvicorn"):
        require(module, "ui")
    import uvicorn

    from dal.serve.app import create_app

    if (tls_cert is None) != (tls_key is None):
        raise DalError("dal serve: give both --tls-cert and --tls-key (or neither, on loopback only)")
    if tls_cert is None and not is_loopback(host):
        raise DalError(
            f"dal serve: plain HTTP is only served on loopback; to listen on {host}, give a certificate and its key "
            "(--tls-cert, --tls-key)"
        )
    if tls_cert is not None and tls_key is not None:
        _check_tls(tls_cert, tls_key)
    from dal.serve.vending import load

    vending = load(storage_credentials, forbid_local=forbid_local_datasets)  # before listening: a bad file is one line
    check_can_listen("dal serve", host, port)
    from dal.serve.app import LOOPBACK_NAMES

    everywhere = host.strip("[]") in ("0.0.0.0", "::")
    hosts = frozenset({*LOOPBACK_NAMES, host.strip("[]"), *allowed_hosts}) | (
        frozenset({"*"}) if everywhere and not allowed_hosts else frozenset()
    )
    from dal.serve import slow

    body_s = slow.BODY_TIMEOUT_S if body_timeout is None else body_timeout
    app = create_app(url, audit_retention_days=audit_retention_days, vending=vending, allowed_hosts=hosts,
                     body_timeout=body_s)  # fmt: skip
    # no access log: request lines are not tokens, but nothing about a request is logged by default
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        access_log=False,
        log_level="warning",
        server_header=False,
        ssl_certfile=tls_cert,
        ssl_keyfile=tls_key,
        h11_max_incomplete_event_size=64 * 1024,
        # slow clients (dal.serve.slow): a deadline for each request head and body, a bound on connections
        http=slow.protocol(slow.HEADER_TIMEOUT_S if header_timeout is None else header_timeout, body_s),
        limit_concurrency=slow.MAX_CONNECTIONS if max_connections is None else max_connections,
        timeout_keep_alive=slow.KEEP_ALIVE_S,
    )
    scheme = "https" if tls_cert else "http"
    where = f"{scheme}://{'[' + host + ']' if ':' in host else host}:{port}"
    print(f"dal serve: serving the catalog on {where}/api/v1/ (clients: DAL_CATALOG_URL={where}) and its web UI on "
          f"{where}/ (sign in with a token); Ctrl-C stops it", flush=True)  # fmt: skip
    uvicorn.Server(config).run()
