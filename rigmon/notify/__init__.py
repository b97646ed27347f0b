"""Notifiers: webhook, ntfy, Slack/Discord payloads and commands, with retry and rate limits."""
