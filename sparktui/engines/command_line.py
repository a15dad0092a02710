"""What the engines' command-line readers (``engines/<kind>/command.py``) share: a bounded whole number,
whether a server listens on loopback only, and how its ``--port`` was given. Pure: the words are untrusted
text from a host."""

from __future__ import annotations

from sparktui.model.numbers import is_digits

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def bounded_whole(raw: str | None, most: int) -> int | None:
    """``raw`` as a whole number from 1 to ``most``; None for anything else (``$PORT``, ``-3``, ``²``)."""
    if raw is None or not is_digits(raw) or len(raw) > len(str(most)):
        return None
    number = int(raw)
    return number if 1 <= number <= most else None


def loopback_only(host: str | None, default_host: str) -> str | None:
    """The loopback address a server listens on when that is all (``host`` as given, else its default),
    else None."""
    listens = host if host is not None else default_host
    return listens if listens in LOOPBACK else None


def port_option_how(port: int | None, raw: str | None, *, given: bool, program: str) -> str:
    """How ``--port`` was given, for the comment that says where the config's port came from."""
    if port is None:
        return f"`--port {raw}`, which init cannot read"
    return f"`--port {port}`" if given else f"{program}'s default port {port}"
