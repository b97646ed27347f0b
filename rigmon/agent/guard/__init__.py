"""The opt-in undervolt guard (issue 20): pure policy, and the agent-side service that acts through rigmon.hw."""
