"""Deterministic dashboards for snapshot tests: seeded fake agents and a frozen clock."""
