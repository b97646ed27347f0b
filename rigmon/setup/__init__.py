"""``rigmon setup agent``: install the agent on a node (user, configuration, tokens, TLS, systemd, udev)."""
