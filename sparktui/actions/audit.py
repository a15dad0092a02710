"""The audit log of recovery actions: one JSON object a line, appended, never rewritten.

Each line has ``time`` (UTC, ISO 8601), ``user`` (the local user who ran sparktui), ``event`` and the
action's fields: ``step`` lines carry the node, target, exact command, exit status, duration and
result of one command or request; an ``action`` line ends each action with its overall result; a
``fix`` line ends a finding's fix (several actions in a row, whose lines carry its ``fix_id``); a
``refused`` line records an action that was not run and why. Secrets (API keys) are never written.

A ``started`` line opens each action and each fix (time, user, node, targets, every command) and is
written and ``fsync``ed before the action's first command is sent (``AuditLog.started``): an action
whose start cannot be recorded on disk is refused, and nothing is sent. Every other line is written
and synced the same way; a line the disk refused half-way is cut off again, so the log never holds a
partial line that the next record would be glued to.

The file is ``$SPARKTUI_AUDIT_LOG`` when set, else ``audit.log`` in the user state folder
(``~/.local/state/sparktui/audit.log`` on Linux, ``$XDG_STATE_HOME/sparktui`` when that is set).
"""

from __future__ import annotations

import contextlib
import errno
import getpass
import json
import os
import stat
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


class AuditError(OSError):
    """The audit log cannot be written; ``reason`` says why in one line (which path, and what is wrong
    with it: a full disk, a file where a folder should be, a read-only file system, a permission)."""

    def __init__(self, reason: str, code: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code

    def __str__(self) -> str:
        return self.reason


class AuditLog:
    """Appends audit records to ``path`` (created 0600, its folder 0700, on first use)."""

    def __init__(self, path: Path | None = None, user: str | None = None) -> None:
        self.path = path if path is not None else default_audit_path()
        self.user = user if user is not None else local_user()

    def check(self) -> str | None:
        """None when the log's folder exists (or was created) and the file opens for appending, else one
        line saying why not and what to do. Writes nothing: a full disk shows only when a record is
        written, which ``started`` does before anything is sent."""
        try:
            self._append(b"")
        except AuditError as exc:
            return self.problem(exc)
        return None

    def problem(self, exc: AuditError) -> str:
        """The one-line refusal for an action whose audit record could not be written."""
        return f"cannot write the audit log {self.path}: {exc.reason}; fix that or set {AUDIT_ENV} to a writable file"

    def started(self, **fields: object) -> str | None:
        """Write and sync the ``started`` record of an action (or a fix) before its first command: None
        when it is on disk, else the one-line reason to refuse the action."""
        try:
            self.write("started", **fields)
        except AuditError as exc:
            return self.problem(exc)
        return None

    def write(self, event: str, **fields: object) -> None:
        """Append one record and fsync it; raises ``AuditError`` (an OSError) when it is not on disk."""
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
        """Create the folder and the file when missing, append ``data`` in one ``write`` (O_APPEND keeps
        concurrent writers' lines whole), fsync the file (and the folder when the file is new)."""
        folder = self.path.parent
        in_the_way = _file_in_the_way(folder)
        if in_the_way is not None:
            raise AuditError(f"{in_the_way} is a file, not a folder", errno.ENOTDIR)
        missing = _first_missing(folder)
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise AuditError(_folder_reason(missing or folder, exc), exc.errno) from exc
        created = not os.path.lexists(self.path)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as exc:
            raise AuditError(_open_reason(self.path, created, exc), exc.errno) from exc
        try:
            regular = stat.S_ISREG(os.fstat(fd).st_mode)
            if data:
                _write_line(fd, data, regular)
                if regular:  # a character device (/dev/stdout...) has nothing to sync
                    os.fsync(fd)
        except OSError as exc:
            raise AuditError(_write_reason(self.path, exc), exc.errno) from exc
        finally:
            os.close(fd)
        if created and data:
            _sync_folder(folder)


def _write_line(fd: int, data: bytes, regular: bool) -> None:
    """Write all of ``data``; when the disk refuses part of it, cut what did land off again (when it is
    still the end of the file), so no half line stays for the next record to be glued to."""
    done = 0
    try:
        while done < len(data):
            wrote = os.write(fd, data[done:])
            if wrote <= 0:
                raise OSError(errno.EIO, "the write wrote nothing")
            done += wrote
    except OSError:
        if done and regular:
            with contextlib.suppress(OSError):
                end = os.lseek(fd, 0, os.SEEK_CUR)  # O_APPEND: just past what this write added
                if os.fstat(fd).st_size == end:
                    os.ftruncate(fd, end - done)
        raise


def _sync_folder(folder: Path) -> None:
    """Make a new file's name durable too (best effort: some file systems cannot sync a folder)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _file_in_the_way(folder: Path) -> Path | None:
    """The first path on the way to ``folder`` (``folder`` included) that exists and is not a folder."""
    for path in (*reversed(folder.parents), folder):
        try:
            if not path.is_dir() and path.exists():
                return path
        except OSError:  # cannot even look: the open or mkdir below says why
            return None
    return None


def _first_missing(folder: Path) -> Path | None:
    """The outermost folder on the way to ``folder`` that does not exist yet (mkdir creates it first)."""
    for path in (*reversed(folder.parents), folder):
        with contextlib.suppress(OSError):
            if not path.exists():
                return path
    return None


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _folder_reason(folder: Path, exc: OSError) -> str:
    """Creating the log's folder failed: which one, and why."""
    parent = folder.parent
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"cannot create the folder {folder}: permission denied ({parent} is not writable by {local_user()})"
    if exc.errno == errno.EROFS:
        return f"cannot create the folder {folder}: {parent} is on a read-only file system"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"cannot create the folder {folder}: {_full(exc)}"
    return f"cannot create the folder {folder} ({_why(exc)})"


def _open_reason(path: Path, created: bool, exc: OSError) -> str:
    folder = path.parent
    if exc.errno == errno.EISDIR:
        return f"{path} is a folder, not a file"
    if exc.errno in (errno.EACCES, errno.EPERM):
        if not created:
            return f"permission denied: {path} is not writable by {local_user()}"
        return f"permission denied: the folder {folder} is not writable by {local_user()}"
    if exc.errno == errno.EROFS:
        return f"{folder} is on a read-only file system"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return _full(exc)
    if exc.errno == errno.ENOENT:
        return f"the folder {folder} does not exist ({_why(exc)})"
    return _why(exc)


def _write_reason(path: Path, exc: OSError) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return _full(exc)
    if exc.errno == errno.EROFS:
        return f"{path.parent} is on a read-only file system"
    return f"the record was not written ({_why(exc)})"


def _full(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "the disk is full (No space left on device)"
    if exc.errno == errno.EDQUOT:
        return "the disk quota is used up (Disk quota exceeded)"
    return "the file cannot grow: it is at the size limit for files (File too large)"
