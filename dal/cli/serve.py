"""``dal serve`` and its administration: ``dal principal``, ``dal token``, ``dal grant / revoke / grants``, ``dal
audit``. The admin commands work on the catalog's database URL directly (run next to the database), or through a
``dal serve`` catalog's admin routes with a token (``dal.catalog.remote_admin``: the server decides what it may)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import click

from dal.cli.base import Group, State, json_option
from dal.errors import DalError

if TYPE_CHECKING:
    from dal.catalog.auth import AuthStore
    from dal.catalog.remote_admin import RemoteAdmin


def _store(ctx: click.Context) -> AuthStore | RemoteAdmin:
    from dal.catalog import remote
    from dal.catalog.auth import AuthStore

    url = ctx.ensure_object(State).url
    if remote.is_remote(url):
        from dal.catalog.remote_admin import RemoteAdmin

        return RemoteAdmin(remote.client(url))
    store = AuthStore(url)
    ctx.call_on_close(store.close)
    return store


def _emit(as_json: bool, value: object, text: str) -> None:
    if as_json:
        from dal.cli.output import emit_json

        emit_json(value)
    else:
        click.echo(text)


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (loopback by default).")
@click.option("--port", default=8766, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False), default=None, help="TLS certificate (PEM).")
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False), default=None, help="Its private key (PEM).")
@click.option(
    "--audit-retention-days",
    type=click.FloatRange(min=0, min_open=True),
    default=365.0,
    show_default=True,
    help="Drop audit rows older than this many days.",
)
@click.option(
    "--storage-credentials",
    type=click.Path(dir_okay=False),
    default=None,
    help="JSON file of the server's storage credentials, to vend short-lived per-dataset ones with each pin "
    "(default: $DAL_SERVE_STORAGE_CREDENTIALS).",
)
@click.option("--forbid-local-datasets", is_flag=True, help="Refuse pins of datasets stored on local paths.")
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    help="A host name clients reach the server by (the Host header), besides --host and loopback; repeatable; * for any.",
)
@click.option(
    "--header-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    help="Seconds a connection has to send each request head (slow clients are answered 408 and closed).",
)
@click.option(
    "--body-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    help="Seconds a request has to send its body (then 408).",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Open connections beyond which requests are answered 503.",
)
@click.pass_context
def serve_cmd(
    ctx: click.Context,
    host: str,
    port: int,
    tls_cert: str | None,
    tls_key: str | None,
    audit_retention_days: float,
    storage_credentials: str | None,
    forbid_local_datasets: bool,
    allowed_hosts: tuple[str, ...],
    header_timeout: float,
    body_timeout: float,
    max_connections: int,
) -> None:
    """Serve the catalog to principals with tokens and grants (JSON API under /api/v1/, the web UI at / after
    signing in with a token; needs dal-catalog[ui])."""
    from dal.catalog import remote
    from dal.serve import serve

    url = ctx.ensure_object(State).url
    if remote.is_remote(url):
        raise DalError("dal serve needs the catalog's database URL (--catalog), not another server's")
    serve(url, host=host, port=port, tls_cert=tls_cert, tls_key=tls_key, audit_retention_days=audit_retention_days,
          storage_credentials=storage_credentials, forbid_local_datasets=forbid_local_datasets,
          allowed_hosts=allowed_hosts, header_timeout=header_timeout, body_timeout=body_timeout,
          max_connections=max_connections)  # fmt: skip


@click.group("principal", cls=Group)
def principal_group() -> None:
    """Users and service principals of dal serve."""


@principal_group.command("create")
@click.argument("name")
@click.option("--service", is_flag=True, help="A service principal (a job), not a user.")
@json_option
@click.pass_context
def principal_create(ctx: click.Context, name: str, service: bool, as_json: bool) -> None:
    """Create a principal."""
    made = _store(ctx).create_principal(name, "service" if service else "user")
    _emit(as_json, {"name": made.name, "kind": made.kind}, f"created {made.kind} {made.name}")


@principal_group.command("list")
@json_option
@click.pass_context
def principal_list(ctx: click.Context, as_json: bool) -> None:
    """List the principals."""
    found = _store(ctx).principals()
    _emit(as_json, [{"name": p.name, "kind": p.kind} for p in found], "\n".join(f"{p.name}\t{p.kind}" for p in found))


@click.group("token", cls=Group)
def token_group() -> None:
    """Bearer tokens of principals (stored hashed; shown once, at creation)."""


@token_group.command("create")
@click.argument("principal")
@click.option("--expires-days", type=click.FloatRange(min=0, max=3650, min_open=True), default=90.0, show_default=True)
@json_option
@click.pass_context
def token_create(ctx: click.Context, principal: str, expires_days: float, as_json: bool) -> None:
    """Create a token for PRINCIPAL and print it (the only time it is shown)."""
    text, token = _store(ctx).create_token(principal, expires_in=timedelta(days=expires_days))
    expires = token.expires_at.isoformat() if token.expires_at else None
    _emit(as_json, {"token": text, "token_id": token.token_id, "principal": principal, "expires_at": expires}, text)


@token_group.command("revoke")
@click.argument("token_id")
@json_option
@click.pass_context
def token_revoke(ctx: click.Context, token_id: str, as_json: bool) -> None:
    """Revoke a token by its id (the part after ``dal_``; ``dal token list``)."""
    _store(ctx).revoke_token(token_id)
    _emit(as_json, {"revoked": token_id}, f"revoked token {token_id}")


@token_group.command("list")
@click.argument("principal", required=False)
@json_option
@click.pass_context
def token_list(ctx: click.Context, principal: str | None, as_json: bool) -> None:
    """List tokens (ids, never secrets)."""
    found = _store(ctx).tokens(principal)
    rows = [
        {
            "token_id": t.token_id,
            "principal": t.principal,
            "expires_at": t.expires_at.isoformat() if t.expires_at else None,
            "revoked": t.revoked,
        }
        for t in found
    ]
    text = "\n".join(f"{r['token_id']}\t{r['principal']}\t{r['expires_at']}\t{'revoked' if r['revoked'] else ''}"
                     for r in rows)  # fmt: skip
    _emit(as_json, rows, text)


@click.command("grant")
@click.argument("principal")
@click.argument("privilege", type=click.Choice(["READ", "WRITE", "MANAGE"], case_sensitive=False))
@click.argument("target")
@json_option
@click.pass_context
def grant_cmd(ctx: click.Context, principal: str, privilege: str, target: str, as_json: bool) -> None:
    """Give PRINCIPAL PRIVILEGE on TARGET: a dataset, a namespace (weather.*) or * (everything)."""
    g = _store(ctx).grant(principal, privilege, target)
    _emit(as_json, g.__dict__, f"granted {g.privilege} on {g.target} to {g.principal}")


@click.command("revoke")
@click.argument("principal")
@click.argument("privilege", type=click.Choice(["READ", "WRITE", "MANAGE"], case_sensitive=False))
@click.argument("target")
@json_option
@click.pass_context
def revoke_cmd(ctx: click.Context, principal: str, privilege: str, target: str, as_json: bool) -> None:
    """Take back a grant."""
    done = _store(ctx).revoke(principal, privilege, target)
    what = f"{privilege.upper()} on {target} from {principal}"
    value = {"principal": principal, "privilege": privilege.upper(), "target": target, "revoked": done}
    _emit(as_json, value, f"revoked {what}" if done else f"no grant of {what}: nothing to revoke")


@click.command("grants")
@click.argument("principal", required=False)
@json_option
@click.pass_context
def grants_cmd(ctx: click.Context, principal: str | None, as_json: bool) -> None:
    """List grants (of one principal, or all)."""
    found = _store(ctx).grants(principal)
    _emit(as_json, [g.__dict__ for g in found], "\n".join(f"{g.principal}\t{g.privilege}\t{g.target}" for g in found))


@click.command("audit")
@click.option("--dataset", default=None, help="Only this dataset.")
@click.option("--principal", default=None, help="Only this principal.")
@click.option("--since", default=None, help="Only from this ISO time on.")
@click.option("--limit", type=click.IntRange(min=1), default=1000, show_default=True, help="The newest N rows.")
@json_option
@click.pass_context
def audit_cmd(
    ctx: click.Context, dataset: str | None, principal: str | None, since: str | None, limit: int, as_json: bool
) -> None:
    """Who pinned which version, admin changes and refusals, oldest first."""
    when = None
    if since is not None:
        try:
            when = datetime.fromisoformat(since)
        except ValueError:
            raise DalError(
                f"--since {since!r} is not an ISO time (e.g. 2026-11-01 or 2026-11-01T12:00:00+00:00)"
            ) from None
        if when.tzinfo is None:
            from datetime import UTC

            when = when.replace(tzinfo=UTC)
    rows = _store(ctx).audit(dataset=dataset, principal=principal, since=when, limit=limit)
    text = "\n".join(
        "\t".join(
            [
                r.at.isoformat(),
                r.principal or "-",
                r.action,
                r.outcome,
                r.dataset or "-",
                "-" if r.version is None else str(r.version),
                r.client,
                r.detail,
            ]
        )
        for r in rows
    )
    _emit(as_json, [r.to_dict() for r in rows], text)


@click.group("auth", cls=Group)
def auth_group() -> None:
    """Log in to a dal serve catalog (--catalog / $DAL_CATALOG_URL / a profile: its https URL) with a token."""


def _served_url(ctx: click.Context) -> str:
    from dal.catalog import remote

    url = ctx.ensure_object(State).url
    if not remote.is_remote(url):
        raise DalError("dal auth logs in to a dal serve catalog: give its URL (--catalog https://host:port)")
    return url


@auth_group.command("login")
@json_option
@click.pass_context
def auth_login(ctx: click.Context, as_json: bool) -> None:
    """Store a token for the catalog's server, read from stdin (or a prompt that does not echo it), in the token
    file (mode 0600): $DAL_TOKEN_FILE, else the profile's token_file, else one under DAL_HOME. The token is checked
    with the server first and never printed."""
    import sys

    from dal.catalog import remote

    url = _served_url(ctx)
    if sys.stdin.isatty():
        token = click.prompt("token", hide_input=True, err=True)
    else:
        token = sys.stdin.readline()
    token = token.strip()
    if not token:
        raise DalError("dal auth login: no token given (on stdin or at the prompt)")
    who, _grants = remote.RemoteCatalog(url, token).whoami()  # a bad token: NotAuthorized, nothing stored
    path = remote.store_token(url, token)
    _emit(as_json, {"url": url, "principal": who, "token_file": path}, f"logged in to {url} as {who} (token in {path})")


@auth_group.command("logout")
@json_option
@click.pass_context
def auth_logout(ctx: click.Context, as_json: bool) -> None:
    """Delete the token file dal auth login wrote for the catalog's server."""
    import os

    from dal.catalog import remote

    url = _served_url(ctx)
    path = os.path.expanduser(remote.token_file(url))
    try:
        os.remove(path)
        done = True
    except FileNotFoundError:
        done = False
    except OSError as e:
        raise DalError(f"cannot delete the token file {path}: {e.strerror or e}") from e
    text = f"logged out of {url} (deleted {path})" if done else f"no token stored for {url} ({path})"
    _emit(as_json, {"url": url, "token_file": path, "deleted": done}, text)


@auth_group.command("whoami")
@json_option
@click.pass_context
def auth_whoami(ctx: click.Context, as_json: bool) -> None:
    """The principal the token names on the catalog's server, and its grants."""
    from dal.catalog import remote

    url = _served_url(ctx)
    who, grants = remote.client(url).whoami()
    lines = [f"{who} on {url}"] + [f"  {p} on {t}" for p, t in grants]
    _emit(as_json, {"url": url, "principal": who, "grants": [{"privilege": p, "target": t} for p, t in grants]},
          "\n".join(lines))  # fmt: skip


COMMANDS: tuple[click.Command, ...] = (
    serve_cmd,
    auth_group,
    principal_group,
    token_group,
    grant_cmd,
    revoke_cmd,
    grants_cmd,
    audit_cmd,
)
