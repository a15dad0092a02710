"""Notifiers: alert events to a generic JSON webhook, ntfy, a Slack-compatible webhook or Telegram."""

from sparktui.notify.notifiers import (
    NOTIFIERS,
    Notifier,
    NotifierHub,
    NotifierStatus,
    NotifyError,
    Outgoing,
    Report,
    event_json,
    make_notifier,
    message_text,
    message_title,
)

__all__ = [
    "NOTIFIERS",
    "Notifier",
    "NotifierHub",
    "NotifierStatus",
    "NotifyError",
    "Outgoing",
    "Report",
    "event_json",
    "make_notifier",
    "message_text",
    "message_title",
]
