"""Notifiers against a real local HTTP receiver (a threaded http.server on 127.0.0.1 that records every
request): each format's request, retries with backoff, Retry-After, answers not worth retrying, a dead
or slow receiver, the bounded queue, the reported state, and secrets kept out of every message and log.
The ``[[notifiers]]`` config schema and its secrets are here too.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import re
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from pydantic import SecretStr

from sparktui.config import ConfigError, load_config, parse_config
from sparktui.diagnosis.alerts import Alert, AlertEvent, AlertKey, AlertState
from sparktui.diagnosis.catalogue import Severity
from sparktui.model.specs import NotifierSpec
from sparktui.notify import NotifierHub, NotifierStatus, event_json, make_notifier, message_text, message_title
from tests.support.fixture_fleet import free_port
from tests.support.wait import wait_until

SRC = "fleet.toml"
NODE = '[[nodes]]\nname = "spark1"\nhost = "10.0.0.1"\n'
BOT_TOKEN = "7012345678:AAFsecretBOTtokenQ9xYz"
HOOK_SECRET = "hk-9f3e1c5a7b2d"
SLACK_SECRET = "xoxb1SLACKsecretPATH"
NTFY_TOKEN = "tk_ntfysecret8d2e"
SECRETS = (BOT_TOKEN, HOOK_SECRET, SLACK_SECRET, NTFY_TOKEN)
WALL = 1780137000.0  # 2026-05-30 10:30:00 UTC
FLOOD_CHUNK = 64 * 1024
HUNDRED_MB = 100 * 1000 * 1000


# --- the receiver ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Received:
    at: float  # time.monotonic() when the request arrived
    method: str
    path: str
    headers: Mapping[str, str]  # lower-case names
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Behaviour:
    status: int = 200
    body: bytes = b'{"ok": true}'
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    echo_path: bool = False  # answer with the request path in the body, as a proxy's error page might
    echo_token_encoded: bool = False  # answer with the bearer token, URL-quoted in every common way
    flood_bytes: int = 0  # after the body, this many more bytes, generated as they are sent (never held)


class Receiver:
    """A real HTTP server on 127.0.0.1 in its own thread; records requests, answers per ``behaviour``."""

    def __init__(self, port: int = 0) -> None:
        self.requests: list[Received] = []
        self.behaviour = Behaviour()
        self.flood_sent: list[int] = []  # per flooding answer: the bytes the client took before it closed
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                headers = {k.lower(): v for k, v in self.headers.items()}
                with receiver._lock:
                    receiver.requests.append(Received(time.monotonic(), "POST", self.path, headers, body))
                    behaviour = receiver.behaviour
                if behaviour.delay_s:
                    time.sleep(behaviour.delay_s)  # the scenario: a slow receiver (its own thread)
                answer = (behaviour.body + b" " + self.path.encode()) if behaviour.echo_path else behaviour.body
                if behaviour.echo_token_encoded:
                    token = headers.get("authorization", "").removeprefix("Bearer ")
                    forms = (quote(token, safe=""), quote(token), quote_plus(token), lower_hex(quote(token, safe="")))
                    answer += b" token=" + " ".join(forms).encode()
                if behaviour.flood_bytes:
                    # A small send buffer: what the kernel takes ahead of the client's reads stays small,
                    # so the count below is close to what the client really read.
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, FLOOD_CHUNK)
                sent = 0
                try:
                    self.send_response(behaviour.status)
                    for name, value in behaviour.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(answer) + behaviour.flood_bytes))
                    self.end_headers()
                    self.wfile.write(answer)
                    chunk = b"x" * FLOOD_CHUNK
                    while sent < behaviour.flood_bytes:
                        sent += self.wfile.write(chunk[: behaviour.flood_bytes - sent]) or 0
                except OSError:
                    pass  # the client gave up (its timeout, or it read enough): nothing to answer
                if behaviour.flood_bytes:
                    with receiver._lock:
                        receiver.flood_sent.append(sent)

            def log_message(self, format: str, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def received(self, path_prefix: str = "") -> list[Received]:
        with self._lock:
            return [r for r in self.requests if r.path.startswith(path_prefix)]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)


def lower_hex(text: str) -> str:
    """Percent escapes in lower-case hex, as some encoders write them (``%2f``)."""
    return re.sub("%[0-9A-F]{2}", lambda m: m[0].lower(), text)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    try:
        yield found
    finally:
        found.close()


# --- events --------------------------------------------------------------------------------------------


def event(
    state: AlertState = AlertState.FIRING,
    severity: Severity = Severity.CRIT,
    summary: str = "spark2 is down",
    silenced: bool = False,
) -> AlertEvent:
    alert = Alert(
        key=AlertKey("node-down", "spark2"),
        name="node-down",
        node="spark2",
        instance=None,
        severity=severity,
        summary=summary,
        evidence=("gemma4: /health connection refused", "GPU exporter: connection refused"),
        fix="Check spark2: `docker logs vllm-gemma4`; restart vLLM with `sparktui action spark2 restart`.",
        value=1.0,
        since=100.0,
        fired_at=130.0,
        fired_wall=WALL,
    )
    if state is AlertState.RESOLVED:
        alert = dataclasses.replace(alert, resolved_at=230.0, resolved_wall=WALL + 100)
        return AlertEvent(state, alert, 230.0, WALL + 100, "spark2 is up again", (), silenced)
    return AlertEvent(state, alert, 130.0, WALL, alert.summary, alert.evidence, silenced)


def spec(**values: object) -> NotifierSpec:
    return NotifierSpec.model_validate({"retries": 0, "backoff_s": 0.05, "timeout_s": 2.0, **values})


class Reports:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, object]]] = []

    def __call__(self, level: str, fields: Mapping[str, object]) -> None:
        self.lines.append((level, dict(fields)))

    def events(self) -> list[str]:
        return [str(fields["event"]) for _, fields in self.lines]

    def text(self) -> str:
        return repr(self.lines)


async def send(specs: list[NotifierSpec], *events: AlertEvent, reports: Reports | None = None) -> NotifierHub:
    hub = NotifierHub(specs, report=reports)
    async with hub:
        for item in events:
            hub.submit(item)
    return hub


# --- the formats -----------------------------------------------------------------------------------------


def test_the_message_says_what_where_the_evidence_and_the_fix() -> None:
    assert message_title(event()) == "FIRING crit: spark2 node-down"
    assert message_text(event()).splitlines() == [
        "FIRING crit: spark2 node-down (held 30s)",
        "spark2 is down",
        "- gemma4: /health connection refused",
        "- GPU exporter: connection refused",
        "fix: Check spark2: `docker logs vllm-gemma4`; restart vLLM with `sparktui action spark2 restart`.",
    ]
    assert message_text(event(AlertState.RESOLVED)).splitlines() == [
        "RESOLVED crit: spark2 node-down after 1m40s",
        "spark2 is up again",
    ]


async def test_generic_webhook_posts_the_event_as_json_with_a_bearer_token(receiver: Receiver) -> None:
    hook = spec(kind="webhook", url=f"{receiver.url}/hook/{HOOK_SECRET}")
    authed = spec(kind="webhook", name="authed", url=f"{receiver.url}/authed", token_env="HOOK_TOKEN")
    authed = authed.model_copy(update={"token": parse_secret(NTFY_TOKEN)})
    await send([hook, authed], event(), event(AlertState.RESOLVED))
    firing, resolved = receiver.received(f"/hook/{HOOK_SECRET}")
    body = firing.json()
    assert isinstance(body, dict)
    assert {k: body[k] for k in ("source", "version", "status", "alert", "rule", "severity", "node", "instance")} == {
        "source": "sparktui",
        "version": 1,
        "status": "firing",
        "alert": "node-down",
        "rule": "node-down",
        "severity": "crit",
        "node": "spark2",
        "instance": None,
    }
    assert body["summary"] == "spark2 is down"
    assert body["evidence"] == ["gemma4: /health connection refused", "GPU exporter: connection refused"]
    assert str(body["fix"]).startswith("Check spark2")
    assert (body["started_at"], body["resolved_at"], body["held_s"]) == ("2026-05-30T10:30:00Z", None, 30.0)
    assert body == event_json(event())
    assert firing.headers["content-type"] == "application/json"
    assert "authorization" not in firing.headers
    done = resolved.json()
    assert isinstance(done, dict)
    assert (done["status"], done["resolved_at"], done["held_s"]) == ("resolved", "2026-05-30T10:31:40Z", 100.0)
    (with_token, _) = receiver.received("/authed")
    assert with_token.headers["authorization"] == f"Bearer {NTFY_TOKEN}"


def parse_secret(value: str) -> SecretStr:
    return SecretStr(value)


async def test_slack_posts_text_with_its_three_escapes(receiver: Receiver) -> None:
    slack = spec(kind="slack", url=f"{receiver.url}/services/T000/B000/{SLACK_SECRET}")
    await send([slack], event(summary="KV cache > 90% & <rising>"))
    (request,) = receiver.received("/services/")
    body = request.json()
    assert isinstance(body, dict) and set(body) == {"text"}
    lines = str(body["text"]).splitlines()
    assert lines[0] == "FIRING crit: spark2 node-down (held 30s)"
    assert lines[1] == "KV cache &gt; 90% &amp; &lt;rising&gt;"


async def test_ntfy_publishes_to_the_topic_with_title_priority_and_tags(receiver: Receiver) -> None:
    ntfy = spec(kind="ntfy", url=receiver.url, topic="spark-alerts", token_env="NTFY")
    ntfy = ntfy.model_copy(update={"token": parse_secret(NTFY_TOKEN)})
    await send(
        [ntfy], event(), event(severity=Severity.WARN, summary="KV-cache usage 95.0%"), event(AlertState.RESOLVED)
    )
    crit, warn, resolved = receiver.received("/spark-alerts")
    assert crit.path == "/spark-alerts"
    assert (crit.headers["title"], crit.headers["priority"], crit.headers["tags"]) == (
        "FIRING crit: spark2 node-down",
        "5",
        "rotating_light",
    )
    assert crit.headers["authorization"] == f"Bearer {NTFY_TOKEN}"
    assert crit.body.decode().splitlines()[0] == "spark2 is down"  # the title is in the header
    assert (warn.headers["priority"], warn.headers["tags"]) == ("4", "warning")
    assert (resolved.headers["title"], resolved.headers["priority"], resolved.headers["tags"]) == (
        "RESOLVED crit: spark2 node-down",
        "3",
        "white_check_mark",
    )


async def test_telegram_calls_send_message_for_the_chat(receiver: Receiver) -> None:
    telegram = spec(kind="telegram", url=receiver.url, token_env="TG", chat_id=-1001234567890)
    telegram = telegram.model_copy(update={"token": parse_secret(BOT_TOKEN)})
    hub = await send([telegram], event())
    (request,) = receiver.received("/bot")
    assert request.path == f"/bot{BOT_TOKEN}/sendMessage"
    body = request.json()
    assert body == {"chat_id": -1001234567890, "text": message_text(event()), "disable_web_page_preview": True}
    (status,) = hub.statuses()
    assert (status.healthy, status.sent, status.failed) == (True, 1, 0)


def test_on_and_min_severity_choose_what_a_notifier_sends() -> None:
    firing_only = make_notifier(spec(kind="slack", url="https://hooks.example/x", on="firing"))
    crit_only = make_notifier(spec(kind="slack", url="https://hooks.example/x", min_severity="crit"))
    assert firing_only.wants(event()) and not firing_only.wants(event(AlertState.RESOLVED))
    assert crit_only.wants(event()) and not crit_only.wants(event(severity=Severity.WARN))
    assert not crit_only.wants(event(silenced=True))


# --- failures ----------------------------------------------------------------------------------------------


async def test_a_failing_receiver_is_retried_with_backoff_then_reported(receiver: Receiver) -> None:
    receiver.behaviour = Behaviour(status=500, body=b"upstream broke")
    reports = Reports()
    hook = spec(kind="webhook", name="ops", url=f"{receiver.url}/hook", retries=3, backoff_s=0.1)
    hub = await send([hook], event(), reports=reports)
    attempts = receiver.received("/hook")
    assert len(attempts) == 4
    gaps = [b.at - a.at for a, b in itertools.pairwise(attempts)]
    for gap, wanted in zip(gaps, (0.1, 0.2, 0.4), strict=True):
        assert gap >= wanted * 0.9, gaps
    assert gaps[2] > gaps[0]
    assert reports.events() == ["notify-retry", "notify-retry", "notify-retry", "notify-failed"]
    level, failed = reports.lines[-1]
    assert level == "err"
    assert failed == {
        "notifier": "ops",
        "kind": "webhook",
        "node": "spark2",
        "alert": "node-down",
        "state": "firing",
        "event": "notify-failed",
        "attempts": 4,
        "error": "HTTP 500: upstream broke",
    }
    assert reports.lines[0][1]["attempt"] == "1/4" and reports.lines[0][1]["retry_in_s"] == "0.1"
    (status,) = hub.statuses()
    assert isinstance(status, NotifierStatus)
    assert (status.healthy, status.sent, status.failed, status.last_error) == (False, 0, 1, "HTTP 500: upstream broke")
    assert status.last_error_wall is not None


async def test_an_answer_that_retrying_cannot_change_is_not_retried(receiver: Receiver) -> None:
    receiver.behaviour = Behaviour(status=401, body=b'{"ok": false, "error_code": 401, "description": "Unauthorized"}')
    reports = Reports()
    telegram = spec(kind="telegram", url=receiver.url, token_env="TG", chat_id=42, retries=3)
    telegram = telegram.model_copy(update={"token": parse_secret(BOT_TOKEN)})
    await send([telegram], event(), reports=reports)
    assert len(receiver.received("/bot")) == 1
    assert reports.lines[-1][1]["error"] == "HTTP 401: Unauthorized"


async def test_a_redirect_is_a_failure_that_says_where_not_followed_nor_retried(receiver: Receiver) -> None:
    # The hook moved, to a path of the same server here: a client that followed it would post there too.
    receiver.behaviour = Behaviour(status=301, body=b"moved", headers={"Location": f"{receiver.url}/new-hook"})
    reports = Reports()
    await send([spec(kind="webhook", url=f"{receiver.url}/hook", retries=2)], event(), reports=reports)
    assert [r.path for r in receiver.received()] == ["/hook"]
    (error,) = [str(fields["error"]) for _, fields in reports.lines if "error" in fields]
    assert error == f"HTTP 301 to {receiver.url}/new-hook, not followed"


async def test_retry_after_is_honoured(receiver: Receiver) -> None:
    receiver.behaviour = Behaviour(status=429, body=b"slow down", headers={"Retry-After": "0.4"})
    hook = spec(kind="webhook", url=f"{receiver.url}/hook", retries=1, backoff_s=0.01)
    await send([hook], event())
    first, second = receiver.received("/hook")
    assert second.at - first.at >= 0.35


async def test_a_receiver_that_is_down_is_retried_reported_and_recovers_when_it_is_back() -> None:
    port = free_port()
    reports = Reports()
    hook = spec(kind="webhook", name="ops", url=f"http://127.0.0.1:{port}/hook/{HOOK_SECRET}", retries=2)
    hub = NotifierHub([hook], report=reports)
    async with hub:
        hub.submit(event())
        await wait_until(lambda: "notify-failed" in reports.events())
        assert reports.events() == ["notify-retry", "notify-retry", "notify-failed"]
        assert reports.lines[-1][1]["error"] == "cannot connect: connection refused"
        assert not hub.statuses()[0].healthy
        back = Receiver(port)
        try:
            hub.submit(event(AlertState.RESOLVED))
            await wait_until(lambda: "notify-recovered" in reports.events())
            assert len(back.received("/hook")) == 1
        finally:
            back.close()
    status = hub.statuses()[0]
    assert (status.healthy, status.sent, status.failed) == (True, 1, 1)


async def test_a_receiver_that_does_not_answer_times_out(receiver: Receiver) -> None:
    receiver.behaviour = Behaviour(delay_s=1.5)
    reports = Reports()
    await send([spec(kind="webhook", url=f"{receiver.url}/hook", timeout_s=0.3)], event(), reports=reports)
    assert reports.lines[-1][1]["error"] == "no answer within 0.3 s"


@pytest.mark.parametrize(
    ("status", "error"),
    [(500, f"HTTP 500: upstream broke {'x' * 184}…"), (200, None)],
    ids=["error-500", "ok-200"],
)
async def test_a_huge_answer_is_read_only_a_few_kib_and_the_reason_comes_from_them(
    receiver: Receiver, status: int, error: str | None
) -> None:
    receiver.behaviour = Behaviour(status=status, body=b"upstream broke ", flood_bytes=HUNDRED_MB)
    reports = Reports()
    hub = await send([spec(kind="webhook", name="hook", url=f"{receiver.url}/hook")], event(), reports=reports)
    await wait_until(lambda: receiver.flood_sent, what="the server to stop sending")
    (sent,) = receiver.flood_sent
    # The client read at most a few KiB and closed: what the server got out is that, a chunk read at once
    # and what the two kernels buffered (well under 8 MiB on loopback), not 100 MB.
    assert sent < 8 * 1024 * 1024, sent
    (status_now,) = hub.statuses()
    errors = [str(fields["error"]) for _, fields in reports.lines if "error" in fields]
    if error is None:
        assert (status_now.healthy, status_now.sent, errors) == (True, 1, [])
    else:
        assert errors == [error] and status_now.last_error == error


async def test_submit_never_waits_and_the_queue_is_bounded(receiver: Receiver) -> None:
    receiver.behaviour = Behaviour(delay_s=0.5)
    reports = Reports()
    hub = NotifierHub([spec(kind="webhook", url=f"{receiver.url}/hook", timeout_s=5.0)], report=reports, queue_size=2)
    async with hub:
        started = time.monotonic()
        for _ in range(6):
            hub.submit(event())
        assert time.monotonic() - started < 0.1
        await wait_until(lambda: len(receiver.received("/hook")) >= 1)
        (status,) = hub.statuses()
        assert (status.queued, status.dropped) == (1, 4)  # two fit; the worker has taken one of them
    assert reports.events().count("notify-dropped") == 4
    assert "queue full (2 events)" in str(reports.lines[0][1]["error"])


async def test_no_secret_reaches_a_report_a_status_or_a_log(
    receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    receiver.behaviour = Behaviour(status=502, body=b"bad gateway for", echo_path=True)
    reports = Reports()
    telegram = spec(kind="telegram", url=receiver.url, token_env="TG", chat_id=42, retries=1)
    telegram = telegram.model_copy(update={"token": parse_secret(BOT_TOKEN)})
    hook = spec(kind="webhook", name="hook", url=f"{receiver.url}/hook/{HOOK_SECRET}", retries=1)
    slack = spec(kind="slack", url=f"{receiver.url}/services/{SLACK_SECRET}", retries=1)
    ntfy = spec(kind="ntfy", url=f"http://127.0.0.1:{free_port()}", topic="alerts-x", token_env="N", retries=1)
    ntfy = ntfy.model_copy(update={"token": parse_secret(NTFY_TOKEN)})
    hub = await send([telegram, hook, slack, ntfy], event(), reports=reports)
    assert len(receiver.received()) == 6  # the secrets really went out, where they belong
    errors = {str(fields["notifier"]): str(fields["error"]) for _, fields in reports.lines if "error" in fields}
    assert errors == {
        "telegram": "HTTP 502: bad gateway for /bot***/sendMessage",
        "hook": "HTTP 502: bad gateway for ***",
        "slack": "HTTP 502: bad gateway for ***",
        "ntfy": "cannot connect: connection refused",
    }
    shown = reports.text() + repr(hub.statuses()) + caplog.text + repr([n.spec for n in hub.notifiers])
    assert "HTTP Request: POST" in caplog.text  # httpx did log its requests: redacted
    for secret in SECRETS:
        assert secret not in shown


async def test_a_token_echoed_percent_encoded_is_redacted_too(receiver: Receiver) -> None:
    token = "Zm9v+YmFy/YmF6 x=="  # base64's '+', '/' and '=' and a space: each has an encoded form
    receiver.behaviour = Behaviour(status=400, body=b"bad token", echo_token_encoded=True)
    reports = Reports()
    hook = spec(kind="webhook", name="hook", url=f"{receiver.url}/hook", token_env="T")
    hook = hook.model_copy(update={"token": parse_secret(token)})
    await send([hook], event(), reports=reports)
    assert receiver.received()[0].headers["authorization"] == f"Bearer {token}"
    (error,) = [str(fields["error"]) for _, fields in reports.lines if "error" in fields]
    assert error == "HTTP 400: bad token token=*** *** *** ***"


async def test_an_answer_quoted_in_an_error_cannot_drive_the_terminal(receiver: Receiver) -> None:
    receiver.behaviour = Behaviour(status=400, body=b"bad\x1b]2;pwned\x07 request\x1b[2J\xc2\x9b1m here")
    telegram = spec(kind="telegram", url=receiver.url, token_env="TG", chat_id=42)
    telegram = telegram.model_copy(update={"token": parse_secret(BOT_TOKEN)})
    deep = "[" * 100_000 + "]" * 100_000
    reports = Reports()
    await send([spec(kind="webhook", name="hook", url=f"{receiver.url}/hook")], event(), reports=reports)
    receiver.behaviour = Behaviour(status=200, body=b'{"ok": false, "description": "no\\u001b[2J chat"}')
    await send([telegram], event(), reports=reports)
    receiver.behaviour = Behaviour(status=500, body=deep.encode())
    await send([telegram], event(), reports=reports)
    errors = [str(fields["error"]) for _, fields in reports.lines if "error" in fields]
    assert errors == ["HTTP 400: bad request here", "Telegram refused: no chat", f"HTTP 500: {deep[:199]}…"]


# --- the config -------------------------------------------------------------------------------------------


def errors_of(text: str, env: Mapping[str, str] | None = None, base_dir: Path | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(NODE + text, source=SRC, env=env or {}, base_dir=base_dir)
    return caught.value.errors


NOTIFIER_ERRORS: list[tuple[str, str]] = [
    (
        'kind = "discord"\n',
        "notifiers[0].kind: must be one of 'webhook', 'ntfy', 'slack' or 'telegram' (got 'discord')",
    ),
    ('kind = "slack"\n', "notifiers[0].url: missing: a slack notifier needs url, url_env or url_file"),
    ('kind = "webhook"\n', "notifiers[0].url: missing: a webhook notifier needs url, url_env or url_file"),
    (
        'kind = "telegram"\nchat_id = 42\n',
        "notifiers[0].token_env: missing: the bot token, from token_env or token_file",
    ),
    (
        'kind = "telegram"\ntoken_env = "TG"\n',
        "notifiers[0].chat_id: missing: the chat to send to (its id, or '@channelname')",
    ),
    ('kind = "ntfy"\n', "notifiers[0].topic: missing: the ntfy topic to publish to"),
    ('kind = "ntfy"\ntopic = "a b"\n', "notifiers[0].topic: must be 1 to 64 letters, digits, '_' or '-'"),
    ('kind = "ntfy"\ntopic = "t"\nchat_id = 5\n', 'notifiers[0].chat_id: only used with kind = "telegram"'),
    ('kind = "slack"\nurl = "https://h.example/x"\ntopic = "t"\n', 'notifiers[0].topic: only used with kind = "ntfy"'),
    (
        'kind = "slack"\nurl = "https://h.example/x"\ntoken_env = "T"\n',
        "notifiers[0].token_env: not used: a Slack webhook's URL is its secret; give it with url_env or url_file",
    ),
    (
        'kind = "slack"\nurl = "https://h.example/x"\nurl_env = "U"\n',
        "notifiers[0].url_env: give one of url, url_env or url_file, not url and url_env",
    ),
    (
        'kind = "telegram"\nchat_id = "my chat"\ntoken_env = "T"\n',
        "notifiers[0].chat_id: must be a Telegram chat id (a number, negative for groups) or '@channelname'",
    ),
    ('kind = "slack"\nurl = "ftp://h.example/x"\n', "notifiers[0].url: must start with http:// or https://"),
    ('kind = "slack"\nurl = "https://h.example/x"\non = "always"\n', "notifiers[0].on: must be one of 'firing', "),
    ('kind = "slack"\nurl = "https://h.example/x"\nretries = 11\n', "notifiers[0].retries: must be <= 10 (got 11)"),
    ('kind = "slack"\nurl = "https://h.example/x"\ntimeout_s = 0\n', "notifiers[0].timeout_s: must be > 0 (got 0)"),
]


@pytest.mark.parametrize(("body", "expected"), NOTIFIER_ERRORS, ids=[e[1].split(": ")[1][:40] for e in NOTIFIER_ERRORS])
def test_each_notifier_error_is_one_line_naming_the_key(body: str, expected: str) -> None:
    (error,) = errors_of("[[notifiers]]\n" + body)
    assert error.startswith(f"{SRC}: {expected}"), error


def test_notifier_names_default_to_the_kind_and_must_be_unique() -> None:
    text = '[[notifiers]]\nkind = "ntfy"\ntopic = "a"\n[[notifiers]]\nkind = "ntfy"\ntopic = "b"\n'
    assert errors_of(text) == [
        f"{SRC}: notifiers[1].name: same as notifiers[0] ('ntfy'); give each notifier its own name"
    ]
    fleet = parse_config(NODE + text.replace('topic = "b"', 'topic = "b"\nname = "phone"'), source=SRC, env={})
    assert [n.name for n in fleet.notifiers] == ["ntfy", "phone"]


def test_secrets_come_from_the_environment_and_files(tmp_path: Path) -> None:
    (tmp_path / "slack.url").write_text(f"https://hooks.slack.com/services/T0/B0/{SLACK_SECRET}\n")
    text = (
        '[[notifiers]]\nkind = "telegram"\ntoken_env = "TG_TOKEN"\nchat_id = "@sparkops"\n'
        '[[notifiers]]\nkind = "slack"\nurl_file = "slack.url"\n'
        '[[notifiers]]\nkind = "webhook"\nurl_env = "HOOK_URL"\n'
    )
    env = {"TG_TOKEN": f" {BOT_TOKEN}\n", "HOOK_URL": f"https://ops.example/hook/{HOOK_SECRET}"}
    fleet = parse_config(NODE + text, source=SRC, env=env, base_dir=tmp_path)
    telegram, slack, hook = fleet.notifiers
    assert telegram.token is not None and telegram.token.get_secret_value() == BOT_TOKEN
    assert telegram.chat_id == "@sparkops"
    assert slack.url is not None and slack.url.get_secret_value().endswith(SLACK_SECRET)
    assert hook.url is not None and hook.url.get_secret_value().endswith(HOOK_SECRET)
    for shown in (repr(fleet), str(fleet), fleet.model_dump_json()):
        for secret in SECRETS:
            assert secret not in shown


def test_secret_problems_are_reported_without_the_secret(tmp_path: Path) -> None:
    (tmp_path / "empty").write_text("\n")
    text = (
        f'[[notifiers]]\nkind = "telegram"\ntoken = "{BOT_TOKEN}"\nchat_id = 1\n'
        '[[notifiers]]\nkind = "telegram"\nname = "tg2"\ntoken_env = "UNSET"\nchat_id = 1\n'
        '[[notifiers]]\nkind = "slack"\nurl_file = "empty"\n'
        '[[notifiers]]\nkind = "webhook"\nurl_env = "BAD_URL"\n'
        f'[[notifiers]]\nkind = "webhook"\nname = "w2"\nurl = "https://user:{HOOK_SECRET}@ops.example/x"\n'
        f'[[notifiers]]\nkind = "webhook"\nname = "w3"\nurl = "https://ops.example/{HOOK_SECRET} x"\n'
        f'[[notifiers]]\nkind = "ntfy"\ntopic = "t"\ntoken_env = "{NTFY_TOKEN}-"\n'
    )
    errors = errors_of(text, env={"BAD_URL": f"ops.example/{SLACK_SECRET}"}, base_dir=tmp_path)
    assert errors == [
        f"{SRC}: notifiers[0].token: tokens do not go in the config file; "
        'set token_env = "VARIABLE" or token_file = "path/to/file" instead',
        f"{SRC}: notifiers[0].token_env: missing: the bot token, from token_env or token_file",
        f"{SRC}: notifiers[4].url: must not contain a user name or password; give a token with token_env or token_file",
        f"{SRC}: notifiers[5].url: must not contain spaces",
        f"{SRC}: notifiers[6].token_env: must be the name of an environment variable (letters, digits and '_'), "
        "not the key itself",
    ]
    for secret in SECRETS:
        assert secret not in "\n".join(errors)


def test_secret_files_and_variables_are_checked_once_the_file_validates(tmp_path: Path) -> None:
    (tmp_path / "empty").write_text("\n")
    text = (
        '[[notifiers]]\nkind = "telegram"\ntoken_env = "UNSET"\nchat_id = 1\n'
        '[[notifiers]]\nkind = "slack"\nurl_file = "empty"\n'
        '[[notifiers]]\nkind = "webhook"\nurl_env = "BAD_URL"\n'
    )
    errors = errors_of(text, env={"BAD_URL": f"ops.example/{SLACK_SECRET}"}, base_dir=tmp_path)
    assert errors == [
        f"{SRC}: notifiers[0].token_env: environment variable UNSET is not set; "
        "export it before starting sparktui, or use token_file",
        f"{SRC}: notifiers[1].url_file: {tmp_path / 'empty'} is empty; put the URL in it",
        f"{SRC}: notifiers[2].url_env: the URL it holds must start with http:// or https://",
    ]


def test_the_example_config_has_working_alerts_and_notifiers() -> None:
    fleet = load_config(Path(__file__).resolve().parents[2] / "docs" / "config.example.toml", env={})
    assert fleet.alerts is not None and len(fleet.alerts) >= 3
    assert {n.kind for n in fleet.notifiers} >= {"ntfy", "webhook"}
