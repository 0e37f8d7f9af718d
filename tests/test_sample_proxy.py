"""The ablation gate on the built-in sample: `proxy_eval` materializes (a tiny budget) for two
recipes and `corpus ablation` compares them."""

from __future__ import annotations

import shutil

from dagster import materialize
from dagster_aws.s3 import S3Resource
from typer.testing import CliRunner

from corpus_assets.dataset import mix, shards, tokenizer
from corpus_assets.proxy import PROXY_EVAL, load_report, proxy_eval
from corpus_cli.main import app
from curation.storage import LocalStore
from resources import ComputeResource, PipelineResource, StorageResource
from tests.test_shards import require_module

TINY = {"token_budget": 4096, "batch_size": 4, "micro_batch_size": 4, "seq_len": 64,
        "layers": 1, "d_model": 32, "heads": 2,
        "eval": {"benchmarks": ["arc_easy", "copa"], "max_items": 20, "resamples": 100}}


def test_proxy_eval_runs_on_the_sample_and_compares(sample_run, shared_data, tmp_path) -> None:
    require_module("torch")
    root = tmp_path / "root"
    shutil.copytree(sample_run.root, root)
    heldout = shared_data / "sources" / "wikipedia" / "wikitext-2-raw_wiki.test.raw"
    config = {"evals_dir": str(shared_data / "evals"), "heldout": str(heldout),
              "settings": TINY}
    resources = {"pipeline": PipelineResource(path=str(sample_run.pipeline_path)),
                 "storage": StorageResource(root=str(root), s3=S3Resource()),
                 "compute": ComputeResource(workers=0)}
    for recipe, extra in (("sample", {}), ("sample", {"baseline": "sample"})):
        result = materialize([proxy_eval, tokenizer.to_source_asset(), mix.to_source_asset(),
                              shards.to_source_asset()],
                             selection=[PROXY_EVAL], partition_key=recipe,
                             instance=sample_run.instance, resources=resources,
                             run_config={"ops": {PROXY_EVAL: {"config": config | extra}}})
        assert result.success
    report = load_report(LocalStore(str(root)), "sample")
    assert report.tokens_trained >= 4096 and {t.name for t in report.tasks} == {"arc_easy", "copa"}
    metadata = result.asset_materializations_for_node(PROXY_EVAL)[0].metadata
    assert metadata["ships"].value is True  # a version compared with itself ships
    out = CliRunner().invoke(app, ["ablation", "sample", "sample", "--root", str(root)])
    assert out.exit_code == 0 and "verdict: ships" in out.output
