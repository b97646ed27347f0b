"""Alarm rule engine shared by the agent (node rules) and the dashboard (cluster rules)."""
