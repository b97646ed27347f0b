"""Alarm rule engine: rules, selectors, lifecycle; pure, shared by the agent and the dashboard."""
