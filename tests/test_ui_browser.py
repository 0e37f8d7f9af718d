"""The UI checked in a real browser: the built-in sample materialized on a test instance, the
webserver on 127.0.0.1 over that instance, and headless chromium rendering the asset graph and
asset pages, with partitions, check results and metadata (tables, the report's funnel plot).

Chromium runs in two ways: the plain command line (`--dump-dom`, `--screenshot`, with a virtual
time budget) for the asset catalog, and driven over the DevTools protocol (the `websockets`
package the webserver already needs) where a page must be waited for, sized or clicked: the
asset graph draws only the nodes in view (a tall viewport holds the dataset group), and the UI
shows Markdown longer than 1,000 characters, such as an embedded plot, behind
"[Show Markdown]".

Screenshots go to `test-artifacts/ui-browser/` (git-ignored); their paths are printed. Without
chromium the tests skip (run scripts/browser.sh), unless CI is set: then they fail.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import requests

from tests.conftest import REPO, free_port

ARTIFACTS = REPO / "test-artifacts" / "ui-browser"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
WINDOW = (1600, 1000)
# The README's assets and the report: the catalog page must list them all.
CATALOG = ("warc_files", "documents", "language", "heuristics", "minhash_signatures",
           "url_dedup", "exact_dedup", "dedup_clusters", "line_dedup", "scrubbed", "cross_dedup",
           "quality_classifier", "quality_scores", "eval_suite", "decontaminated", "tokenizer",
           "mix", "shards", "report")
DATASET_ASSETS = ("tokenizer", "mix", "shards", "report")


def find_chromium() -> str | None:
    configured = os.environ.get("CHROMIUM")
    if configured:
        return configured
    return next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)


@pytest.fixture(scope="session")
def chromium() -> str:
    """The browser, or a skip with the reason; in CI (CI set) its absence is a failure."""
    found = find_chromium()
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed; CI must run scripts/browser.sh first")
    pytest.skip("chromium is not installed: run scripts/browser.sh (set CI to make this fail)")


def _shot(name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / f"{name}.png"


def _announce(capsys: pytest.CaptureFixture, *paths: Path) -> None:
    with capsys.disabled():
        for path in paths:
            print(f"\nscreenshot: {path}")


@pytest.fixture(scope="module")
def webserver(chromium: str, sample_run, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[str]:
    """The webserver over the sample run's instance: its own DAGSTER_HOME whose dagster.yaml
    points at the same SQLite run, event and schedule storage, without the community pop-up."""
    home = tmp_path_factory.mktemp("ui-home")
    instance_dir = Path(sample_run.base) / "home"
    (home / "dagster.yaml").write_text(
        f"storage:\n  sqlite:\n    base_dir: {json.dumps(str(instance_dir))}\n"
        "telemetry:\n  enabled: false\nnux:\n  enabled: false\n")
    from dagster import DagsterInstance

    check = DagsterInstance.from_config(str(home))
    try:  # the same storage as the fixture's instance
        assert check.get_runs_count() == sample_run.instance.get_runs_count() > 0
    finally:
        check.dispose()
    port = free_port()
    webserver = Path(sys.executable).parent / "dagster-webserver"
    process = subprocess.Popen(
        [str(webserver), "-m", "corpus_assets.definitions", "-h", "127.0.0.1", "-p", str(port)],
        cwd=REPO, env={**os.environ, "DAGSTER_HOME": str(home)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if requests.get(f"{base}/server_info", timeout=2).ok:
                    break
            except requests.ConnectionError:
                pass
            assert process.poll() is None, "the webserver exited"
            assert time.monotonic() < deadline, "the webserver did not answer in 120 s"
            time.sleep(0.5)
        _wait_for_code_location(base, deadline)
        yield base
    finally:
        os.killpg(process.pid, 15)
        process.wait(30)


def _wait_for_code_location(base: str, deadline: float) -> None:
    query = "{ assetNodes { assetKey { path } } }"
    while True:
        answer = requests.post(f"{base}/graphql", json={"query": query}, timeout=30).json()
        if answer.get("data", {}).get("assetNodes"):
            return
        assert time.monotonic() < deadline, "the code location did not load"
        time.sleep(0.5)


# --- chromium on the command line ------------------------------------------------------------


def _chromium_cli(chromium: str, url: str, screenshot: Path, budget_ms: int,
                  window: tuple[int, int] = WINDOW) -> str:
    """The DOM after `budget_ms` of virtual time, and a screenshot of the same page (a second
    load: it may show a later or earlier state than the DOM)."""
    with tempfile.TemporaryDirectory() as profile:
        common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                  f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}",
                  f"--window-size={window[0]},{window[1]}"]
        dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True,
                             timeout=240, check=True).stdout
        subprocess.run([*common, f"--screenshot={screenshot}", url], capture_output=True,
                       timeout=240, check=True)
    return dom


def test_asset_catalog_lists_every_asset(chromium: str, webserver: str,
                                         capsys: pytest.CaptureFixture) -> None:
    shot = _shot("asset-catalog")
    wanted = [f">{name}<" for name in CATALOG]
    for budget in (15_000, 30_000, 60_000):  # a loaded machine answers GraphQL slower
        dom = _chromium_cli(chromium, f"{webserver}/assets", shot, budget, (1600, 2400))
        if all(text in dom for text in wanted):
            break
    _announce(capsys, shot)
    missing = [text for text in wanted if text not in dom]
    assert not missing, f"the asset catalog lacks {missing}; see {shot}"
    assert "4 partitions" in dom and "1 partition" in dom


# --- chromium over the DevTools protocol -----------------------------------------------------


class Browser:
    """Headless chromium driven over the DevTools protocol: navigate, wait for a condition,
    evaluate JavaScript, click, capture."""

    def __init__(self, chromium: str) -> None:
        from websockets.sync.client import connect

        self.profile = tempfile.TemporaryDirectory()
        self.process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--remote-debugging-port=0", f"--user-data-dir={self.profile.name}",
             f"--window-size={WINDOW[0]},{WINDOW[1]}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        marker = Path(self.profile.name) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (marker.exists() and marker.read_text().strip()):
            assert self.process.poll() is None, "chromium exited"
            assert time.monotonic() < deadline, "chromium opened no DevTools port in 60 s"
            time.sleep(0.2)
        port = marker.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as answer:
            page = next(t for t in json.load(answer) if t["type"] == "page")
        self.closing = ExitStack()
        self.socket = self.closing.enter_context(
            connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=30))
        self.ids = itertools.count(1)

    def call(self, method: str, **params: object) -> dict:
        number = next(self.ids)
        self.socket.send(json.dumps({"id": number, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=120))
            if message.get("id") == number:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def evaluate(self, expression: str) -> object:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        return result["result"].get("value")

    def viewport(self, width: int, height: int) -> None:
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def open(self, url: str, *texts: str, timeout: float = 240) -> str:
        """Navigates and waits until the page's text holds every one of `texts`; returns it."""
        self.call("Page.navigate", url=url)
        condition = " && ".join(f"document.body.innerText.includes({json.dumps(t)})"
                                for t in texts)
        self.wait(f"document.body !== null && {condition}", timeout,
                  f"{url} never showed {texts}")
        time.sleep(1)  # let the last requests settle before a screenshot
        return str(self.evaluate("document.body.innerText"))

    def wait(self, expression: str, timeout: float, message: str) -> object:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.5)
        raise AssertionError(message)

    def dom(self) -> str:
        return str(self.evaluate("document.documentElement.outerHTML"))

    def screenshot(self, path: Path) -> Path:
        """The viewport, once transitions (a dialog fading in) have finished."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and self.evaluate(
                "document.getAnimations().some(a => a.playState === 'running' "
                "&& a.effect && a.effect.getComputedTiming().iterations !== Infinity)"):
            time.sleep(0.2)
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        self.closing.close()
        os.killpg(self.process.pid, 15)
        self.process.wait(30)
        self.profile.cleanup()


@pytest.fixture(scope="module")
def browser(chromium: str, webserver: str) -> Iterator[Browser]:
    opened = Browser(chromium)
    try:
        yield opened
    finally:
        opened.close()


def test_asset_graph_shows_the_dataset_assets_with_checks_and_partitions(
        browser: Browser, webserver: str, capsys: pytest.CaptureFixture) -> None:
    # The graph draws only the nodes in view: a tall viewport holds the whole dataset group.
    browser.viewport(1600, 2400)
    try:
        url = f"{webserver}/locations/corpus_assets.definitions/asset-groups/dataset/lineage"
        text = browser.open(url, *DATASET_ASSETS, "Passed", "partition")
        lines = text.splitlines()
        assert all(name in lines for name in DATASET_ASSETS)  # node titles
        assert any(re.fullmatch(r"(\d+) / \1 Passed", line) for line in lines)  # checks
        assert "documents" in lines and "scrubbed" in lines  # upstream per-snapshot assets
        shot = browser.screenshot(_shot("asset-graph-dataset"))
    finally:
        browser.viewport(*WINDOW)
    _announce(capsys, shot)


def test_documents_page_shows_partitions_and_check_results(
        browser: Browser, webserver: str, capsys: pytest.CaptureFixture) -> None:
    text = browser.open(f"{webserver}/assets/documents?view=partitions",
                        "SAMPLE-01", "SAMPLE-02", "source:code", "source:reference")
    assert "Materialized (4)" in text
    partitions = browser.screenshot(_shot("documents-partitions"))
    text = browser.open(f"{webserver}/assets/documents?view=checks",
                        "documents_contract", "documents_survival", "Passed")
    assert "Succeeded" in text
    checks = browser.screenshot(_shot("documents-checks"))
    _announce(capsys, partitions, checks)


def test_mix_page_shows_its_metadata_tables(browser: Browser, webserver: str,
                                            capsys: pytest.CaptureFixture) -> None:
    text = browser.open(f"{webserver}/assets/mix?view=partitions&partition=sample",
                        "documents_selected", "shares", "planned share")
    for expected in ("selection_funnel", "quality", "duplicate", "reference", "web", "anneal"):
        assert expected in text
    assert "<table" in browser.dom()  # the Markdown tables render as tables
    _announce(capsys, browser.screenshot(_shot("mix-metadata")))


def test_report_page_shows_the_funnel_and_its_plot(browser: Browser, webserver: str,
                                                   capsys: pytest.CaptureFixture) -> None:
    text = browser.open(f"{webserver}/assets/report?view=partitions&partition=sample",
                        "funnel", "selection.quality", "report_path", "funnel_plot")
    for expected in ("documents_in", "documents_out", "shard_tokens", "cross_dedup", "edits",
                     "reports/sample/report.html"):
        assert expected in text
    table = browser.screenshot(_shot("report-metadata"))
    # The plot is Markdown longer than the UI shows inline: open it.
    browser.evaluate("""(() => {
        const row = [...document.querySelectorAll('tr')]
            .find(r => r.innerText.trim().startsWith('funnel_plot'));
        const links = [...row.querySelectorAll('*')]
            .filter(e => e.innerText === '[Show Markdown]');
        links[links.length - 1].click();
    })()""")
    size = browser.wait(
        "(() => { const i = [...document.querySelectorAll('img')]"
        ".find(i => i.src.startsWith('data:image/png;base64,') && i.complete"
        " && i.naturalWidth > 0); return i ? [i.naturalWidth, i.naturalHeight] : null; })()",
        30, "the funnel plot never rendered")
    assert size[0] > 300 and size[1] > 150
    _announce(capsys, table, browser.screenshot(_shot("report-funnel-plot")))
