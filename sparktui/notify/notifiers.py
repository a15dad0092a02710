"""Alert events out over HTTP: a generic JSON webhook, ntfy, a Slack-compatible webhook, Telegram.

``NotifierHub`` owns one bounded queue and one sending task per notifier: ``submit()`` only queues, so
monitoring never waits for a notifier, and a slow or dead one holds up nobody but itself. Each event is
tried ``1 + retries`` times with exponential backoff (``backoff_s``, doubling, at most a minute; a
``Retry-After`` is honoured); an answer that retrying cannot change (401, 404 ...) is not retried. A
failure is reported through the ``report`` callback (the watcher logs it) and kept in the notifier's
``NotifierStatus`` for a screen to show; so is the recovery that follows.

Secrets (bot tokens, URLs with a token in their path, ntfy access tokens) are never put in a message:
errors are described in our own words, anything quoted from an answer is redacted, and httpx's own
request log lines are redacted too while a hub is open.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar
from urllib.parse import quote, quote_plus

from sparktui.diagnosis.alerts import AlertEvent, AlertState
from sparktui.diagnosis.catalogue import Severity
from sparktui.model.safe_text import safe_text
from sparktui.model.specs import NotifierSpec
from sparktui.model.units import fmt_duration
from sparktui.sources._httpx import httpx
from sparktui.sources.http import _refused, make_client, redirect_target  # _refused: the poller's own test

QUEUE_SIZE = 100  # events waiting per notifier; past this the oldest is dropped (and reported)
MAX_BACKOFF_S = 60.0
MAX_TEXT_CHARS = 3500  # under Telegram's 4096 and Slack's comfortable message size
MAX_EVIDENCE_LINES = 8
MAX_QUOTED_CHARS = 200  # of an error answer's body
# Of any answer's body: only a prefix is ever looked at (a Telegram answer is ~300 bytes, an error page's
# first words are its reason). The rest is not read; the connection is closed instead.
MAX_REPLY_BYTES = 4096
DEFAULT_DRAIN_S = 5.0
NTFY_DEFAULT_URL = "https://ntfy.sh"
TELEGRAM_DEFAULT_URL = "https://api.telegram.org"
REDACTED = "***"
MIN_SECRET_CHARS = 4  # shorter "secrets" would redact ordinary words

# (level, fields): the watcher turns these into log lines; the keys are the line's key=value pairs.
Report = Callable[[str, Mapping[str, object]], None]

_NTFY_PRIORITY = {Severity.CRIT: "5", Severity.WARN: "4", Severity.INFO: "3"}
_NTFY_TAGS = {Severity.CRIT: "rotating_light", Severity.WARN: "warning", Severity.INFO: "information_source"}


class NotifyError(Exception):
    """One failed attempt, described without any secret. ``retry``: another attempt may work."""

    def __init__(self, message: str, *, retry: bool, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry = retry
        self.retry_after_s = retry_after_s


@dataclass(frozen=True, slots=True)
class Reply:
    """A notifier's answer as read: the status, the headers and at most ``MAX_REPLY_BYTES`` of the body
    (``cut``: there was more, not read)."""

    status_code: int
    headers: Mapping[str, str]
    body: bytes = b""
    cut: bool = False

    @property
    def text(self) -> str:
        # Webhook answers are UTF-8 (or ASCII) in practice; a character cut at the prefix's end is replaced.
        return self.body.decode("utf-8", "replace")

    def json(self) -> object:
        return json.loads(self.body)


@dataclass(frozen=True, slots=True)
class Outgoing:
    """The HTTP request a notifier makes for one event (always a POST)."""

    url: str
    headers: Mapping[str, str]
    json: object | None = None
    content: bytes | None = None


# --- the message ---------------------------------------------------------------------------------------


def message_title(event: AlertEvent) -> str:
    """One line, ASCII only (it goes into an HTTP header for ntfy): ``FIRING crit: spark2 node-down``."""
    alert = event.alert
    where = alert.node if alert.instance is None else f"{alert.node}/{alert.instance}"
    title = f"{event.state.value.upper()} {alert.severity.value}: {where} {alert.name}"
    return title.encode("ascii", "replace").decode("ascii")


def message_text(event: AlertEvent, *, title: bool = True) -> str:
    """The message every chat notifier sends: what, where, the evidence, and on firing the fix."""
    alert = event.alert
    lines: list[str] = []
    if title:
        held = fmt_duration(event.held_s)
        lines.append(
            message_title(event) + (f" (held {held})" if event.state is AlertState.FIRING else f" after {held}")
        )
    lines.append(event.summary)
    evidence = event.evidence[:MAX_EVIDENCE_LINES]
    lines.extend(f"- {line}" for line in evidence)
    if len(event.evidence) > len(evidence):
        lines.append(f"- ... and {len(event.evidence) - len(evidence)} more")
    if event.state is AlertState.FIRING:
        lines.append(f"fix: {alert.fix}")
    text = "\n".join(lines)
    return text if len(text) <= MAX_TEXT_CHARS else text[: MAX_TEXT_CHARS - 1] + "…"


def _iso(wall: float | None) -> str | None:
    return None if wall is None else datetime.fromtimestamp(wall, UTC).isoformat().replace("+00:00", "Z")


def event_json(event: AlertEvent) -> dict[str, object]:
    """The generic webhook's body (docs/alerts.md documents every field)."""
    alert = event.alert
    return {
        "source": "sparktui",
        "version": 1,
        "status": event.state.value,
        "alert": alert.name,
        "rule": alert.rule,
        "key": str(alert.key),
        "severity": alert.severity.value,
        "node": alert.node,
        "instance": alert.instance,
        "summary": event.summary,
        "evidence": list(event.evidence),
        "fix": alert.fix,
        "value": alert.value,
        "started_at": _iso(alert.fired_wall),
        "resolved_at": _iso(alert.resolved_wall),
        "held_s": round(event.held_s, 1),
        "text": message_text(event),
    }


def _slack_escape(text: str) -> str:
    # Slack reads &, < and > as markup: its docs ask for these three escapes, and only these.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_PERCENT_ESCAPE = re.compile(r"%[0-9A-F]{2}")


def secret_forms(secrets: Iterable[str]) -> tuple[str, ...]:
    """Each secret as it is, and as a server may echo it back: percent-encoded (all of it, or all but
    '/'), form-encoded (spaces as '+'), with upper- or lower-case hex; longest first, so a form is
    replaced before a shorter form inside it."""
    found: set[str] = set()
    for secret in secrets:
        if len(secret) < MIN_SECRET_CHARS:
            continue
        encoded = {secret, quote(secret, safe=""), quote(secret), quote_plus(secret), quote_plus(secret, safe="/")}
        found |= encoded
        found |= {_PERCENT_ESCAPE.sub(lambda m: m[0].lower(), form) for form in encoded}
    return tuple(sorted(found, key=len, reverse=True))


# --- the notifiers ---------------------------------------------------------------------------------------


class Notifier:
    """One configured notifier: what it sends for an event and how to read its answer."""

    kind: ClassVar[str] = ""

    def __init__(self, spec: NotifierSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.url = spec.url.get_secret_value().rstrip("/") if spec.url is not None else ""
        self.token = spec.token.get_secret_value() if spec.token is not None else None

    def wants(self, event: AlertEvent) -> bool:
        if event.silenced:
            return False
        if self.spec.on not in ("both", event.state.value):
            return False
        return event.alert.severity.rank >= Severity(self.spec.min_severity).rank

    def request(self, event: AlertEvent) -> Outgoing:
        raise NotImplementedError

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def secrets(self) -> tuple[str, ...]:
        """Every string that must never be shown: the token, the URL and its path, each also in the
        encoded forms a server may echo (``secret_forms``)."""
        found = [self.token or "", self.url]
        parsed = httpx.URL(self.url) if self.url else None
        if parsed is not None:
            found.append(parsed.raw_path.decode("ascii", "replace"))
            found.append(parsed.path)
        return secret_forms(s for s in found if s != "/")

    def redact(self, text: str) -> str:
        for secret in self.secrets():
            text = text.replace(secret, REDACTED)
        return text

    def check_answer(self, response: Reply) -> None:
        """Raise NotifyError unless the answer says the message was taken."""
        status = response.status_code
        if 200 <= status < 300:
            return
        where = redirect_target(status, response.headers)
        if where is not None:
            message = f"HTTP {status} to {where}, not followed"
        else:
            detail = self._detail(response)
            message = f"HTTP {status}" + (f": {detail}" if detail else "")
        retry_after = _retry_after(response.headers.get("retry-after"))
        raise NotifyError(self.redact(message), retry=status in (408, 429) or status >= 500, retry_after_s=retry_after)

    def _detail(self, response: Reply) -> str:
        # Quoted from the answer's prefix into the watch log and the status: made safe to print here,
        # and redacted before it is cut (a secret cut in two would not be found whole afterwards).
        words = " ".join(response.text.split()) + ("…" if response.cut else "")
        return safe_text(self.redact(words), MAX_QUOTED_CHARS)


class WebhookNotifier(Notifier):
    """A generic JSON webhook: the event as a JSON object, with a bearer token when one is given."""

    kind = "webhook"

    def request(self, event: AlertEvent) -> Outgoing:
        return Outgoing(self.url, self.auth_headers(), json=event_json(event))


class SlackNotifier(Notifier):
    """A Slack incoming webhook, or anything that takes its ``{"text": ...}`` (Mattermost, Rocket.Chat,
    Discord's ``/slack`` endpoint)."""

    kind = "slack"

    def request(self, event: AlertEvent) -> Outgoing:
        return Outgoing(self.url, {}, json={"text": _slack_escape(message_text(event))})


class NtfyNotifier(Notifier):
    """ntfy: the text as the body of a POST to the topic; title, priority and tags as headers."""

    kind = "ntfy"

    def __init__(self, spec: NotifierSpec) -> None:
        super().__init__(spec)
        self.url = self.url or NTFY_DEFAULT_URL
        self.topic = spec.topic or ""

    def request(self, event: AlertEvent) -> Outgoing:
        severity = event.alert.severity
        firing = event.state is AlertState.FIRING
        headers = {
            "Title": message_title(event),
            "Priority": _NTFY_PRIORITY[severity] if firing else "3",
            "Tags": _NTFY_TAGS[severity] if firing else "white_check_mark",
            **self.auth_headers(),
        }
        body = message_text(event, title=False).encode("utf-8")
        return Outgoing(f"{self.url}/{self.topic}", headers, content=body)

    def secrets(self) -> tuple[str, ...]:
        # On a public server the topic name is what keeps strangers from reading the alerts.
        return tuple(sorted({*super().secrets(), *secret_forms([self.topic])}, key=len, reverse=True))


class TelegramNotifier(Notifier):
    """Telegram's Bot API: ``sendMessage`` to one chat, plain text."""

    kind = "telegram"

    def __init__(self, spec: NotifierSpec) -> None:
        super().__init__(spec)
        self.url = self.url or TELEGRAM_DEFAULT_URL

    def request(self, event: AlertEvent) -> Outgoing:
        body = {"chat_id": self.spec.chat_id, "text": message_text(event), "disable_web_page_preview": True}
        return Outgoing(f"{self.url}/bot{self.token}/sendMessage", {}, json=body)

    def auth_headers(self) -> dict[str, str]:
        return {}  # the bot token goes in the path, never in a header

    def check_answer(self, response: Reply) -> None:
        answer = _json_object(response)
        if 200 <= response.status_code < 300 and answer.get("ok") is not False:
            return
        if 200 <= response.status_code < 300:
            raise NotifyError(self.redact(f"Telegram refused: {self._detail(response)}"), retry=False)
        super().check_answer(response)

    def _detail(self, response: Reply) -> str:
        answer = _json_object(response)
        description = answer.get("description")
        if isinstance(description, str):
            return safe_text(description, MAX_QUOTED_CHARS)
        return super()._detail(response)


def _json_object(response: Reply) -> dict[str, object]:
    try:
        found = response.json()
    except (ValueError, RecursionError):
        return {}
    return found if isinstance(found, dict) else {}


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date: the exponential backoff will do
    return min(max(seconds, 0.0), MAX_BACKOFF_S)


NOTIFIERS: Mapping[str, type[Notifier]] = {
    cls.kind: cls for cls in (WebhookNotifier, SlackNotifier, NtfyNotifier, TelegramNotifier)
}


def make_notifier(spec: NotifierSpec) -> Notifier:
    return NOTIFIERS[spec.kind](spec)


# --- sending -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NotifierStatus:
    """How a notifier is doing, for a screen: ``healthy`` False after its last event failed for good."""

    name: str
    kind: str
    healthy: bool
    sent: int
    failed: int
    dropped: int
    queued: int
    last_error: str | None
    last_error_wall: float | None
    last_sent_wall: float | None


class _Slot:
    def __init__(self, notifier: Notifier, queue_size: int) -> None:
        self.notifier = notifier
        self.queue: asyncio.Queue[AlertEvent] = asyncio.Queue(maxsize=queue_size)
        self.task: asyncio.Task[None] | None = None
        self.healthy = True
        self.sent = 0
        self.failed = 0
        self.dropped = 0
        self.last_error: str | None = None
        self.last_error_wall: float | None = None
        self.last_sent_wall: float | None = None

    def status(self) -> NotifierStatus:
        n = self.notifier
        return NotifierStatus(
            name=n.name,
            kind=n.kind,
            healthy=self.healthy,
            sent=self.sent,
            failed=self.failed,
            dropped=self.dropped,
            queued=self.queue.qsize(),
            last_error=self.last_error,
            last_error_wall=self.last_error_wall,
            last_sent_wall=self.last_sent_wall,
        )


class _RedactSecrets(logging.Filter):
    """httpx logs every request's URL at INFO: a Telegram bot token is in that URL."""

    def __init__(self, secrets: Sequence[str]) -> None:
        super().__init__()
        self.secrets = tuple(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if any(secret in message for secret in self.secrets):
            for secret in self.secrets:
                message = message.replace(secret, REDACTED)
            record.msg, record.args = message, None
        return True


def _describe(exc: httpx.HTTPError, timeout_s: float) -> NotifyError:
    """An httpx error in our words: its own text may quote the URL."""
    if isinstance(exc, httpx.TimeoutException):
        return NotifyError(f"no answer within {timeout_s:g} s", retry=True)
    if isinstance(exc, httpx.ConnectError):
        return NotifyError("cannot connect: connection refused" if _refused(exc) else "cannot connect", retry=True)
    if isinstance(exc, httpx.RemoteProtocolError):
        return NotifyError("the connection closed before an answer", retry=True)
    return NotifyError(f"request failed ({type(exc).__name__})", retry=True)


async def _post(client: httpx.AsyncClient, outgoing: Outgoing, timeout_s: float) -> Reply:
    """POST ``outgoing`` and read at most ``MAX_REPLY_BYTES`` of the answer's body, undecoded: a receiver
    that answers with megabytes (an error page, a loop) costs a few KiB, and the connection is closed
    (leaving the ``stream`` block unread closes it rather than keeping it alive)."""
    # identity: the prefix read is the text itself, and no compressed answer is inflated here.
    headers = {"Accept-Encoding": "identity", **outgoing.headers}
    async with client.stream(
        "POST", outgoing.url, headers=headers, json=outgoing.json, content=outgoing.content, timeout=timeout_s
    ) as response:
        body = bytearray()
        async for chunk in response.aiter_raw():
            body += chunk[: MAX_REPLY_BYTES + 1 - len(body)]
            if len(body) > MAX_REPLY_BYTES:
                break
        return Reply(response.status_code, response.headers, bytes(body[:MAX_REPLY_BYTES]), len(body) > MAX_REPLY_BYTES)


def _no_report(_level: str, _fields: Mapping[str, object]) -> None:
    return None


class NotifierHub:
    """Sends alert events to every notifier that wants them, each from its own queue and task."""

    def __init__(
        self,
        specs: Sequence[NotifierSpec],
        *,
        client: httpx.AsyncClient | None = None,
        report: Report | None = None,
        queue_size: int = QUEUE_SIZE,
        wall: Callable[[], float] = time.time,
        ca_file: Path | None = None,
    ) -> None:
        self._ca_file = ca_file
        self._slots = [_Slot(make_notifier(spec), queue_size) for spec in specs]
        self._client = client
        self._own_client = client is None
        self._report = report or _no_report
        self._wall = wall
        secrets = {s for slot in self._slots for s in slot.notifier.secrets()}
        self._filter = _RedactSecrets(sorted(secrets, key=len, reverse=True)) if secrets else None
        self._started = False

    @property
    def notifiers(self) -> tuple[Notifier, ...]:
        return tuple(slot.notifier for slot in self._slots)

    async def __aenter__(self) -> NotifierHub:
        self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        if self._filter is not None:
            logging.getLogger("httpx").addFilter(self._filter)
        if self._slots and self._client is None:
            self._client = make_client(ca_file=self._ca_file)
        for slot in self._slots:
            slot.task = asyncio.create_task(self._worker(slot), name=f"notify-{slot.notifier.name}")

    async def close(self, drain_s: float = DEFAULT_DRAIN_S) -> None:
        """Give queued events ``drain_s`` seconds to go out, then stop."""
        if not self._started:
            return
        self._started = False
        pending = [asyncio.create_task(slot.queue.join()) for slot in self._slots]
        if pending:
            _done, waiting = await asyncio.wait(pending, timeout=drain_s)
            for task in waiting:
                task.cancel()
        tasks = [slot.task for slot in self._slots if slot.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for slot in self._slots:
            if slot.queue.qsize():
                slot.dropped += slot.queue.qsize()
                self._report(
                    "warning",
                    {"event": "notify-dropped", "notifier": slot.notifier.name, "dropped": slot.queue.qsize()},
                )
        if self._own_client and self._client is not None:
            await self._client.aclose()
            self._client = None
        if self._filter is not None:
            logging.getLogger("httpx").removeFilter(self._filter)

    def submit(self, event: AlertEvent) -> int:
        """Queue ``event`` for every notifier that wants it; never waits. Returns how many took it."""
        taken = 0
        for slot in self._slots:
            if not slot.notifier.wants(event):
                continue
            if slot.queue.full():
                slot.queue.get_nowait()  # the oldest goes: the newest says the most about now
                slot.queue.task_done()
                slot.dropped += 1
                self._report(
                    "warning",
                    {
                        "event": "notify-dropped",
                        "notifier": slot.notifier.name,
                        "dropped": 1,
                        "error": f"queue full ({slot.queue.maxsize} events): the notifier cannot keep up",
                    },
                )
            slot.queue.put_nowait(event)
            taken += 1
        return taken

    def statuses(self) -> tuple[NotifierStatus, ...]:
        return tuple(slot.status() for slot in self._slots)

    async def _worker(self, slot: _Slot) -> None:
        while True:
            event = await slot.queue.get()
            try:
                await self._deliver(slot, event)
            except Exception as exc:  # a bug in one notifier must not end its queue
                self._failed(slot, event, f"internal error ({type(exc).__name__})", 1)
            finally:
                slot.queue.task_done()

    async def _deliver(self, slot: _Slot, event: AlertEvent) -> None:
        spec = slot.notifier.spec
        attempts = 1 + spec.retries
        for attempt in range(1, attempts + 1):
            try:
                await self._send_once(slot, event)
            except NotifyError as exc:
                if not exc.retry or attempt == attempts:
                    self._failed(slot, event, exc.message, attempt)
                    return
                delay = exc.retry_after_s if exc.retry_after_s is not None else spec.backoff_s * 2 ** (attempt - 1)
                delay = min(delay, MAX_BACKOFF_S)
                self._report(
                    "warning",
                    {
                        **self._fields(slot, event),
                        "event": "notify-retry",
                        "attempt": f"{attempt}/{attempts}",
                        "retry_in_s": f"{delay:g}",
                        "error": exc.message,
                    },
                )
                await asyncio.sleep(delay)
            else:
                self._sent(slot, event)
                return

    async def _send_once(self, slot: _Slot, event: AlertEvent) -> None:
        notifier = slot.notifier
        outgoing = notifier.request(event)
        timeout_s = notifier.spec.timeout_s
        client = self._client
        assert client is not None
        try:
            async with asyncio.timeout(timeout_s):
                response = await _post(client, outgoing, timeout_s)
        except TimeoutError:
            raise NotifyError(f"no answer within {timeout_s:g} s", retry=True) from None
        except httpx.HTTPError as exc:
            raise _describe(exc, timeout_s) from None
        notifier.check_answer(response)

    def _fields(self, slot: _Slot, event: AlertEvent) -> dict[str, object]:
        alert = event.alert
        return {
            "notifier": slot.notifier.name,
            "kind": slot.notifier.kind,
            "node": alert.node,
            "alert": alert.name,
            "state": event.state.value,
        }

    def _sent(self, slot: _Slot, event: AlertEvent) -> None:
        slot.sent += 1
        slot.last_sent_wall = self._wall()
        if not slot.healthy:
            slot.healthy = True
            self._report("notice", {**self._fields(slot, event), "event": "notify-recovered"})

    def _failed(self, slot: _Slot, event: AlertEvent, message: str, attempts: int) -> None:
        message = slot.notifier.redact(message)
        slot.failed += 1
        slot.healthy = False
        slot.last_error = message
        slot.last_error_wall = self._wall()
        self._report(
            "err",
            {**self._fields(slot, event), "event": "notify-failed", "attempts": attempts, "error": message},
        )
