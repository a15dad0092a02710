"""The audit log of recovery actions: one JSON object a line, appended, never rewritten.

Each line has ``time`` (UTC, ISO 8601), ``user`` (the local user who ran sparktui), ``event`` and the
action's fields: ``step`` lines carry the node, target, exact command, exit status, duration and
result of one command or request; an ``action`` line ends each action with its overall result; a
``fix`` line ends a finding's fix (several actions in a row, whose lines carry its ``fix_id``); a
``refused`` line records an action that was not run and why. Secrets (API keys) are never written.

The file is ``$SPARKTUI_AUDIT_LOG`` when set, else ``audit.log`` in the user state folder
(``~/.local/state/sparktui/audit.log`` on Linux, ``$XDG_STATE_HOME/sparktui`` when that is set).
"""

from __future__ import annotations

import getpass
import json
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from platformdirs import user_state_path

AUDIT_ENV = "SPARKTUI_AUDIT_LOG"
APP_NAME = "sparktui"


def default_audit_path(env: Mapping[str, str] = os.environ) -> Path:
    configured = env.get(AUDIT_ENV, "").strip()
    if configured:
        return Path(configured).expanduser()
    return user_state_path(APP_NAME, appauthor=False) / "audit.log"


def local_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no LOGNAME/USER
        return f"uid {os.getuid()}"


class AuditLog:
    """Appends audit records to ``path`` (created 0600, its folder 0700, on first use)."""

    def __init__(self, path: Path | None = None, user: str | None = None) -> None:
        self.path = path if path is not None else default_audit_path()
        self.user = user if user is not None else local_user()

    def check(self) -> str | None:
        """None when the log can be appended to, else one line saying why not and what to do."""
        try:
            self._append(b"")
        except OSError as exc:
            reason = exc.strerror or str(exc)
            return (
                f"cannot write the audit log {self.path} ({reason}); fix the folder's permissions "
                f"or set {AUDIT_ENV} to a writable file"
            )
        return None

    def write(self, event: str, **fields: object) -> None:
        """Append one record; raises OSError when the file cannot be written."""
        record: dict[str, object] = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "user": self.user,
            "event": event,
            **fields,
        }
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        self._append(line.encode("utf-8"))

    def records(self) -> list[dict[str, object]]:
        """Every record so far (for the action log screen and tests); unreadable lines are skipped."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        out: list[dict[str, object]] = []
        for line in text.splitlines():
            try:
                found = json.loads(line)
            except ValueError:
                continue
            if isinstance(found, dict):
                out.append(found)
        return out

    def _append(self, data: bytes) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            if data:
                os.write(fd, data)  # one write of one line: O_APPEND keeps concurrent writers' lines whole
        finally:
            os.close(fd)
