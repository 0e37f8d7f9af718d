"""Gates a deployment can meet and tune (issue 18, item 3): every bound is a setting, a tunable
check can be made a warning that stops nothing downstream (in the run and in later runs), a
mistyped check name fails the config load with a did-you-mean, and a curated source is not
judged by the web's bounds."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from dagster import AssetCheckSeverity, AssetKey, instance_for_test

from corpus_assets.definitions import defs
from corpus_assets.main_job import main_run_config
from curation.config import ConfigError, load_pipeline
from curation.graph import CORRECTNESS_CHECKS, TUNABLE_CHECKS
from partitions import SNAPSHOT_PARTITIONS_NAME

WIKI = "source:wiki"


def write_pipeline(folder: Path, gates: dict, filters: str = "web") -> Path:
    """A pipeline with one curated source of the 62 WikiText-2 test articles (one JSON line
    each); `filters: web` lets the web heuristics judge it."""
    path = folder / "pipeline.yaml"
    path.write_text(yaml.safe_dump({
        "snapshots": {"UNUSED": {"warc": {"path": "warc/"}}},
        "sources": {"wiki": {"path": "wiki/", "format": "jsonl", "licence": "CC-BY-SA-3.0",
                             "filters": filters}},
        "gates": gates}))
    return path


def wiki_source(shared: Path, folder: Path) -> None:
    raw = (shared / "sources" / "wikipedia" / "wikitext-2-raw_wiki.test.raw").read_text(
        encoding="utf-8")
    parts = re.split(r"(?m)^ = (?!=)(.+?) = \s*$", raw)
    (folder / "wiki").mkdir()
    (folder / "wiki" / "articles.jsonl").write_text("".join(
        json.dumps({"text": f"{title}\n{body.strip()}"}) + "\n"
        for title, body in zip(parts[1::2], parts[2::2], strict=True)))


# --- the settings ----------------------------------------------------------------------------


def test_every_check_is_tunable_or_a_correctness_check() -> None:
    defined = {key.name for key in defs.resolve_asset_graph().asset_check_keys}
    assert set(TUNABLE_CHECKS) | set(CORRECTNESS_CHECKS) == defined
    assert not set(TUNABLE_CHECKS) & set(CORRECTNESS_CHECKS)


def test_a_mistyped_or_correctness_check_name_fails_the_load(tmp_path: Path) -> None:
    path = write_pipeline(tmp_path, {"severity": {"heuristic_keep_rate": "warn"}})
    with pytest.raises(ConfigError, match=r"gates\.severity.*did you mean "
                                          r"'heuristics_keep_rate'\?"):
        load_pipeline(path)
    write_pipeline(tmp_path, {"severity": {"shards_integrity": "warn"}})
    with pytest.raises(ConfigError, match="correctness check"):
        load_pipeline(path)
    write_pipeline(tmp_path, {"severity": {"heuristics_keep_rate": "ignore"}})
    with pytest.raises(ConfigError, match=r"gates\.severity\.heuristics_keep_rate"):
        load_pipeline(path)
    write_pipeline(tmp_path, {"mix_share_tolerance": 0})
    with pytest.raises(ConfigError, match=r"gates\.mix_share_tolerance"):
        load_pipeline(path)
    write_pipeline(tmp_path, {"severity": {"heuristics_keep_rate": "warn",
                                           "language_drift": "error"},
                              "mix_share_tolerance": 0.03})
    gates = load_pipeline(path).gates
    assert gates.mix_share_tolerance == 0.03
    assert (gates.severity_of("heuristics_keep_rate"), gates.severity_of("language_drift"),
            gates.severity_of("mix_shares_on_target")) == ("warn", "error", "error")


# --- on a real instance ----------------------------------------------------------------------


def _run(job: str, instance, path: Path, root: Path, selection: list[str] | None = None):
    job_def = defs.resolve_job_def(job)
    return job_def.execute_in_process(
        partition_key=WIKI, instance=instance, raise_on_error=False,
        asset_selection=[AssetKey(name) for name in selection] if selection else None,
        run_config=main_run_config(str(path), str(root), workers=0))


def _keep_rate_evaluation(result):
    evaluations = [e.asset_check_evaluation_data for e in result.all_events
                   if e.event_type_value == "ASSET_CHECK_EVALUATION"
                   and e.asset_check_evaluation_data.check_name == "heuristics_keep_rate"]
    assert len(evaluations) == 1
    return evaluations[0]


def test_a_warning_gate_stops_nothing_and_an_error_gate_stops_scrubbed(
        shared_data: Path, tmp_path: Path) -> None:
    """WikiText judged by the web heuristics keeps a few percent of its articles, under the
    default bound of 5%: as an error the gate stops `scrubbed` in the run and in a later run;
    made a warning it stops nothing. Under `filters: curated` it is not judged at all."""
    wiki_source(shared_data, tmp_path)
    root = tmp_path / "data"
    (tmp_path / "home").mkdir()
    with instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        instance.add_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME, [WIKI])
        path = write_pipeline(tmp_path, {})
        result = _run("per_snapshot", instance, path, root)
        failed = _keep_rate_evaluation(result)
        assert not failed.passed and failed.severity == AssetCheckSeverity.ERROR
        assert "outside gates.heuristics_keep" in failed.description
        assert not (root / "scrubbed" / WIKI / "_manifest.json").exists()
        again = _run("per_snapshot", instance, path, root, ["scrubbed"])
        assert not again.success  # a later run alone refuses the failed partition too

        path = write_pipeline(tmp_path, {"severity": {"heuristics_keep_rate": "warn"}})
        result = _run("per_snapshot", instance, path, root)
        warned = _keep_rate_evaluation(result)
        assert not warned.passed and warned.severity == AssetCheckSeverity.WARN
        assert result.success and (root / "scrubbed" / WIKI / "_manifest.json").exists()
        assert _run("per_snapshot", instance, path, root, ["scrubbed"]).success

        path = write_pipeline(tmp_path, {}, filters="curated")
        curated = _keep_rate_evaluation(_run("per_snapshot", instance, path, root,
                                             ["documents", "language", "heuristics",
                                              "minhash_signatures"]))
        assert curated.passed and curated.description.startswith(
            "not judged: source wiki has filters: curated")
