"""Dashboard side without UI: agent clients, per-node stores, node summaries."""
