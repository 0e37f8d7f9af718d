"""The code location loads, with the asset graph, checks, job and sensor it promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dagster import AssetKey, DagsterInstance, build_sensor_context, instance_for_test

from corpus_assets.definitions import defs
from corpus_assets.proxy import OPT_IN_GROUP
from corpus_assets.sensors import register_partitions
from partitions import RECIPE_PARTITIONS_NAME, SNAPSHOT_PARTITIONS_NAME
from resources import PipelineResource
from tests.conftest import REPO

PER_SNAPSHOT = {"warc_files", "documents", "language", "heuristics", "minhash_signatures",
                "url_dedup", "exact_dedup", "dedup_clusters", "line_dedup", "embeddings",
                "semantic_dedup", "quality_scores", "domains"}


def test_definitions_load_with_the_asset_graph() -> None:
    graph = defs.resolve_asset_graph()
    keys = {key.to_user_string() for key in graph.get_all_asset_keys()}
    assert PER_SNAPSHOT | {"quality_classifier", "cross_dedup"} <= keys
    assert graph.get(AssetKey("documents")).parent_keys == {AssetKey("warc_files")}
    assert graph.get(AssetKey("quality_scores")).parent_keys == {
        AssetKey("documents"), AssetKey("language"), AssetKey("quality_classifier"),
        AssetKey("embeddings")}
    assert graph.get(AssetKey("embeddings")).parent_keys == {AssetKey("scrubbed")}
    assert graph.get(AssetKey("semantic_dedup")).parent_keys == {AssetKey("documents"),
                                                                  AssetKey("embeddings")}
    assert AssetKey("semantic_dedup") in graph.get(AssetKey("mix")).parent_keys
    for key in PER_SNAPSHOT:
        assert graph.get(AssetKey(key)).partitions_def.name == SNAPSHOT_PARTITIONS_NAME
    assert graph.get(AssetKey("quality_classifier")).partitions_def is None
    assert graph.get(AssetKey("cross_dedup")).partitions_def is None
    checks = {check.name for check in graph.asset_check_keys}
    assert {"documents_contract", "documents_survival", "warc_files_listed",
            "language_keeps_documents", "language_drift", "heuristics_cover_documents",
            "heuristics_keep_rate", "quality_classifier_separates",
            "quality_scores_cover_documents"} <= checks
    for job in ("per_snapshot", "models", "scores"):
        assert defs.resolve_job_def(job) is not None


def test_dagster_cli_lists_the_assets(tmp_path: Path) -> None:
    # `dagster asset list` takes the module (it has no -w option).
    dagster = Path(sys.executable).parent / "dagster"
    result = subprocess.run([str(dagster), "asset", "list", "-m", "corpus_assets.definitions"],
                            cwd=REPO,
                            capture_output=True, text=True, timeout=120,
                            env={"DAGSTER_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert {"warc_files", "documents"} <= set(result.stdout.split())


def test_sensor_registers_the_partitions_of_pipeline_yaml(tmp_path: Path) -> None:
    with instance_for_test(temp_dir=str(tmp_path)) as instance:
        assert isinstance(instance, DagsterInstance)
        context = build_sensor_context(instance=instance,
                                       resources={"pipeline": PipelineResource(
                                           path=str(REPO / "pipeline.yaml"))})
        result = register_partitions(context)
        requests = result.dynamic_partitions_requests
        assert [r.partition_keys for r in requests] == [
            ["SAMPLE-01", "SAMPLE-02", "source:code", "source:reference"], ["sample"]]
        assert [r.partitions_def_name for r in requests] == [SNAPSHOT_PARTITIONS_NAME,
                                                              RECIPE_PARTITIONS_NAME]
        for request in requests:
            instance.add_dynamic_partitions(request.partitions_def_name, request.partition_keys)
        again = register_partitions(build_sensor_context(
            instance=instance,
            resources={"pipeline": PipelineResource(path=str(REPO / "pipeline.yaml"))}))
        assert "registered" in str(again.skip_message)


def test_every_check_says_why_in_its_description(sample_run) -> None:
    """The UI shows a check's description beside its result: every check of the main job gives
    its reason there (the CLI prints the same text for a failure)."""
    seen = set()
    for result in sample_run.results.values():
        for evaluation in result.get_asset_check_evaluations():
            seen.add(evaluation.check_name)
            assert evaluation.description, f"{evaluation.check_name} gives no description"
    graph = defs.resolve_asset_graph()
    assert seen == {key.name for key in graph.asset_check_keys
                    if graph.get(key.asset_key).group_name != OPT_IN_GROUP}
