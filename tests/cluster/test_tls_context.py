"""Dashboard clients share TLS contexts: one per CA file for https:// agents, none loaded for http://."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from pathlib import Path

import pytest

from rigmon.cluster.client import AgentClient, tls_context


def _close(clients: list[AgentClient]) -> None:
    async def close() -> None:
        for client in clients:
            await client.aclose()

    asyncio.run(close())


def test_http_agents_load_no_certificate_authority() -> None:
    clients = [AgentClient(f"http://127.0.0.1:{9871 + i}") for i in range(64)]
    try:
        contexts = {id(c.tls_context) for c in clients}
        assert len(contexts) == 1
        # Nothing was loaded for them: no CA bundle read, a TLS peer would be refused.
        stats = clients[0].tls_context.cert_store_stats()
        assert stats["x509_ca"] == 0 and stats["x509"] == 0
        assert clients[0].tls_context.verify_mode == ssl.CERT_REQUIRED
    finally:
        _close(clients)


def test_https_agents_share_the_default_store() -> None:
    clients = [AgentClient(f"https://node{i}:9871") for i in range(8)]
    try:
        assert len({id(c.tls_context) for c in clients}) == 1
        assert clients[0].tls_context.cert_store_stats()["x509_ca"] > 0
        assert clients[0].tls_context is not AgentClient("http://x:1").tls_context
    finally:
        _close(clients)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl to make certificates")
def test_one_context_per_ca_file(tmp_path: Path) -> None:
    pems = []
    for name in ("a", "b"):
        pem, key = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                        f"/CN={name}", "-keyout", str(key), "-out", str(pem)], check=True, capture_output=True)
        pems.append(pem)
    clients = [AgentClient(f"https://n{i}:9871", ca_file=str(pems[i % 2])) for i in range(6)]
    try:
        by_file: dict[int, set[int]] = {0: set(), 1: set()}
        for i, client in enumerate(clients):
            by_file[i % 2].add(id(client.tls_context))
        assert len(by_file[0]) == len(by_file[1]) == 1 and by_file[0] != by_file[1]
        assert clients[0].tls_context.cert_store_stats()["x509_ca"] == 1
        # The same file by another spelling is the same context.
        relative = tls_context("https://n:1", str(pems[0]).replace(str(tmp_path), str(tmp_path / ".")))
        assert relative is clients[0].tls_context
    finally:
        _close(clients)
