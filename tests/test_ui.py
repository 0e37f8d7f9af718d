"""The UI: the webserver on 127.0.0.1 serves a deployment's asset graph with its partitions over
GraphQL."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import requests
from typer.testing import CliRunner

from corpus_cli.deployment import ui_environment
from corpus_cli.main import app
from tests.conftest import REPO, free_port
from tests.deployments import REAL, make_real_deployment

QUERY = """
{ assetNodes { assetKey { path } dependencyKeys { path }
  partitionKeysByDimension { partitionKeys } hasAssetChecks } }
"""



def test_webserver_serves_assets_with_partitions(tmp_path: Path, monkeypatch) -> None:
    """The webserver as `corpus ui` starts it for a deployment folder: from that folder, with
    its environment, it serves that deployment's partitions (and no other's)."""
    folder = make_real_deployment(tmp_path / "real")
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.chdir(folder)
    registered = CliRunner().invoke(app, ["snapshots", "register"])
    assert registered.exit_code == 0, registered.output
    env = {**os.environ, **ui_environment()}
    port = free_port()
    webserver = Path(sys.executable).parent / "dagster-webserver"
    process = subprocess.Popen(
        [str(webserver), "-w", str(REPO / "workspace.yaml"), "-h", "127.0.0.1", "-p", str(port)],
        cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                if requests.get(f"{base}/server_info", timeout=2).ok:
                    break
            except requests.ConnectionError:
                pass
            assert process.poll() is None, "the webserver exited"
            assert time.monotonic() < deadline, "the webserver did not answer in 90 s"
            time.sleep(0.5)
        nodes = _asset_nodes(base, deadline)
        documents = nodes["documents"]
        assert documents["dependencyKeys"] == [{"path": ["warc_files"]}]
        assert documents["hasAssetChecks"]
        keys = documents["partitionKeysByDimension"][0]["partitionKeys"]
        assert set(keys) == {REAL, "source:code", "source:reference"}
        assert "warc_files" in nodes
    finally:
        os.killpg(process.pid, 15)
        process.wait(30)


def _asset_nodes(base: str, deadline: float) -> dict[str, dict]:
    # The code location loads in a subprocess after the server answers; poll until it has.
    while True:
        answer = requests.post(f"{base}/graphql", json={"query": QUERY}, timeout=30).json()
        nodes = {"/".join(n["assetKey"]["path"]): n for n in answer["data"]["assetNodes"]}
        if nodes or time.monotonic() > deadline:
            return nodes
        time.sleep(0.5)
