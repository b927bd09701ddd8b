"""Is a TCP port free to listen on? Asked before anything slow loads, so ``carrier run`` and
``carrier serve`` fail in a line, and ``carrier doctor`` can tell."""

from __future__ import annotations

import errno
import socket

__all__ = ["port_problem"]


def port_problem(host: str, port: int) -> str | None:
    """None when ``host:port`` can be listened on now; else why not, in a sentence that says
    what to do. Binds the way uvicorn does (``SO_REUSEADDR``), then lets go at once."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"cannot listen on {host}: the name does not resolve ({exc.strerror})"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return (
                    f"port {port} on {host} is in use (another carrier, or another server); "
                    f"stop it or try --port {port + 1}"
                )
            if exc.errno == errno.EACCES:
                return f"no permission to listen on port {port} on {host}; try --port 8000"
            if exc.errno == errno.EADDRNOTAVAIL:
                return f"{host} is not an address of this machine; try --host 127.0.0.1"
            return f"cannot listen on {host}:{port}: {exc.strerror or exc}"
    return None
