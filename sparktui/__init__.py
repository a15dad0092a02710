"""sparktui: an operations dashboard for vLLM on NVIDIA DGX Spark fleets."""

from __future__ import annotations


def installed_version() -> str:
    """The installed package's version ("(not installed)" when run from a bare checkout)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sparktui")
    except PackageNotFoundError:
        return "(not installed)"
