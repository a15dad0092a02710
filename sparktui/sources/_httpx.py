"""httpx, imported without its command-line tool: every sparktui module takes httpx from here.

httpx's package ``__init__`` imports its command-line tool, which drags in click, pygments and rich
(~40 ms, and a UI library in processes that must not load one). A None entry makes that import fail
fast, and httpx then falls back to a stub ``main``; the client itself is unaffected.
"""

import sys

sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

import httpx  # noqa: E402

__all__ = ["httpx"]
