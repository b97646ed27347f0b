"""Latency probes between agents: statistics, the probe datagram, the responder and the sender (issue 21)."""
