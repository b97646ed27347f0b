"""Notifiers: a generic JSON webhook, ntfy, Slack- and Discord-compatible webhooks, and a command."""
