"""sparktui: an operations dashboard for vLLM on NVIDIA DGX Spark fleets."""

from __future__ import annotations

import warnings

# asyncssh (pinned at 2.24.1) still loads DSA support, and cryptography 47 and later warns at import
# that DSA is deprecated: a note to asyncssh's maintainers that every sparktui command would print to
# stderr, around its own one-line reasons. sparktui offers and accepts no DSA key; the warning says
# nothing an operator can act on. Only that warning, only from asyncssh, is silenced.
warnings.filterwarnings("ignore", message="DSA is deprecated", module=r"asyncssh(\.|$)")


def installed_version() -> str:
    """The installed package's version ("(not installed)" when run from a bare checkout)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sparktui")
    except PackageNotFoundError:
        return "(not installed)"
