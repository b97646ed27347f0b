"""The agent: sampler, ring buffer, HTTP API."""
