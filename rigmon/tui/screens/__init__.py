"""Screens of the dashboard: cluster overview, one node, help."""
