"""Where ``dal ui`` and ``dal serve`` may listen: loopback detection and a port check before the server starts.

Both servers refuse plain HTTP beyond loopback and turn a taken port or an address this machine lacks into one
line, rather than uvicorn's exit; ``command`` names which server in that line.
"""

from __future__ import annotations

import errno
import ipaddress
import socket

from dal.errors import DalError


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_can_listen(command: str, host: str, port: int) -> None:
    """Bind ``host:port`` once and let it go.

    Raises:
        DalError: the port is taken (naming ``--port``) or the address cannot be bound, as ``command`` (``dal ui``,
            ``dal serve``) says it.
    """
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except OSError as e:
        raise DalError(f"{command} cannot listen on {host}:{port}: {e.strerror or e}") from e
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as e:
            hint = " (pick another with --port)" if e.errno == errno.EADDRINUSE else ""
            raise DalError(f"{command} cannot listen on {host}:{port}: {e.strerror or e}{hint}") from e
