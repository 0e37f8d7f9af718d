"""The UI: the webserver on 127.0.0.1 serves the asset graph with its partitions over GraphQL."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import requests
from dagster import DagsterInstance

from partitions import SNAPSHOT_PARTITIONS_NAME
from tests.conftest import REPO, free_port

QUERY = """
{ assetNodes { assetKey { path } dependencyKeys { path }
  partitionKeysByDimension { partitionKeys } hasAssetChecks } }
"""



def test_webserver_serves_assets_with_partitions(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copyfile(REPO / "dagster.yaml", home / "dagster.yaml")
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    instance = DagsterInstance.from_config(str(home))
    instance.add_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME, ["SAMPLE-01", "CC-MAIN-2024-10"])
    instance.dispose()
    port = free_port()
    webserver = Path(sys.executable).parent / "dagster-webserver"
    process = subprocess.Popen(
        [str(webserver), "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
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
        assert set(keys) == {"SAMPLE-01", "CC-MAIN-2024-10"}
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
