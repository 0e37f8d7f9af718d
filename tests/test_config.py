"""pipeline.yaml and recipes: validation names the field; versions cover only what they should."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from curation.config import ConfigError, dataset_version, load_pipeline, load_recipe
from curation.sample.generate import generate_sample
from tests.conftest import REPO

GOOD_PIPELINE = """
version: 1
snapshots:
  CC-MAIN-2024-10:
    warc: {listing: warc.paths.gz, sample: {files: 2, method: random, seed: 3}}
  LOCAL-01:
    warc: {path: warcs/}
sources:
  books: {path: books/, format: text, licence: public-domain}
documents: {languages: [en]}
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_repository_files_are_valid(tmp_path) -> None:
    # The repository's pipeline.yaml reads the built-in sample, so generate it beside a copy.
    generate_sample(tmp_path / "data" / "sample")
    shutil.copyfile(REPO / "pipeline.yaml", tmp_path / "pipeline.yaml")
    pipeline = load_pipeline(tmp_path / "pipeline.yaml")
    assert Path(pipeline.documents.url_filter.domain_blocklist).is_file()
    assert pipeline.partition_keys() == ["SAMPLE-01", "SAMPLE-02", "source:code",
                                         "source:reference"]
    for recipe in (REPO / "recipes").glob("*.yaml"):
        load_recipe(recipe, pipeline)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("snapshots: {X: {warc: {path: a}}}\ndocuments: {extractor: magic}", "documents.extractor"),
        ("snapshots: {X: {warc: {path: a}}}\ndocuments: {timeout_seconds: -1}",
         "documents.timeout_seconds"),
        ("snapshots: {X: {warc: {path: a}}}\ndocuments: {languages: [English]}",
         "documents.languages"),
        ("snapshots: {X: {warc: {s3_prefix: 'http://no'}}}", "snapshots.X.warc"),
        ("snapshots: {'bad id!': {warc: {path: a}}}", "snapshots"),
        ("snapshots: {X: {warc: {path: a}}}\nsources: {b: {path: p}}", "sources.b.licence"),
        ("snapshots: {X: {warc: {path: a}}}\nsurprise: 1", "surprise"),
        ("snapshots: {X: {warc: {path: a}}}\ndocuments: {survival: {min: 0.9, max: 0.1}}",
         "documents.survival"),
        ("version: 1", "snapshots"),
        ("snapshots: {X: {warc: {path: a}}}\nheuristics: {languages: {ja: {segmenter: mecab}}}",
         "heuristics.languages.ja.segmenter"),
        ("snapshots: {X: {warc: {path: a}}}\n"
         "heuristics: {languages: {th: {gopher_quality: {min_avg_word_len: 1}}}}",
         "heuristics.languages.th"),
    ],
)
def test_invalid_pipeline_names_the_field(tmp_path, text, field) -> None:
    with pytest.raises(ConfigError) as error:
        load_pipeline(_write(tmp_path, "pipeline.yaml", text))
    assert f": {field}" in str(error.value)
    assert "pipeline.yaml" in str(error.value)


def test_unreadable_yaml_and_missing_file_fail_clearly(tmp_path) -> None:
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_pipeline(_write(tmp_path, "p.yaml", "snapshots: [unclosed"))
    with pytest.raises(ConfigError, match="file not found"):
        load_pipeline(tmp_path / "absent.yaml")


RECIPE = """
name: r1
snapshots: [LOCAL-01]
sources: [books]
phases:
  - {name: main, fraction: 0.8, weights: {web: 0.7, books: 0.3}}
  - {name: anneal, fraction: 0.2, weights: {books: 1.0}}
tokenizer: {path: tok.json}
seed: 7
"""


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (("fraction: 0.2", "fraction: 0.3"), "phases"),
        (("snapshots: [LOCAL-01]", "snapshots: [NOPE]"), "snapshots.0"),
        (("sources: [books]", "sources: [films]"), "sources.0"),
        (("{books: 1.0}", "{films: 1.0}"), "weights.films"),
        (("tokenizer: {path: tok.json}", "tokenizer: {}"), "tokenizer"),
        (("seed: 7", "seed: seven"), "seed"),
    ],
)
def test_invalid_recipe_names_the_field(tmp_path, change, field) -> None:
    pipeline = load_pipeline(_write(tmp_path, "pipeline.yaml", GOOD_PIPELINE))
    with pytest.raises(ConfigError) as error:
        load_recipe(_recipe(tmp_path, RECIPE.replace(*change)), pipeline)
    assert field in str(error.value)


def _recipe(tmp_path: Path, text: str, folder: str = "recipes") -> Path:
    """The recipe as `{folder}/r1.yaml` (its file name is its name) beside a pinned tok.json."""
    (tmp_path / "tok.json").write_text("{}")
    (tmp_path / folder).mkdir(exist_ok=True)
    return _write(tmp_path / folder, "r1.yaml", text)


def test_dataset_version_covers_recipe_inputs_and_code_but_not_other_partitions(tmp_path):
    pipeline = load_pipeline(_write(tmp_path, "pipeline.yaml", GOOD_PIPELINE))
    recipe = load_recipe(_recipe(tmp_path, RECIPE), pipeline)

    def version(pipeline=pipeline, recipe=recipe, takedowns="t1", inputs=None, code=None):
        return dataset_version(recipe, pipeline, takedown_version=takedowns,
                               input_data_versions=inputs or {"documents/LOCAL-01": "a"},
                               code_versions=code or {"mix": "1"})

    base = version()
    assert base == version()
    assert version(takedowns="t2") != base
    assert version(inputs={"documents/LOCAL-01": "b"}) != base
    assert version(code={"mix": "2"}) != base
    reseeded = load_recipe(_recipe(tmp_path, RECIPE.replace("seed: 7", "seed: 8"), "other"),
                           pipeline)
    assert version(recipe=reseeded) != base
    # A snapshot the recipe does not use changes nothing; its own snapshot's entry does.
    more = GOOD_PIPELINE.replace("sources:", "  NEW-01:\n    warc: {path: new/}\nsources:")
    assert version(pipeline=load_pipeline(_write(tmp_path, "p2.yaml", more))) == base
    moved = GOOD_PIPELINE.replace("path: warcs/", "path: elsewhere/")
    assert version(pipeline=load_pipeline(_write(tmp_path, "p3.yaml", moved))) != base


def test_section_hash_covers_only_its_partition(tmp_path) -> None:
    pipeline = load_pipeline(_write(tmp_path, "pipeline.yaml", GOOD_PIPELINE))
    more = load_pipeline(_write(tmp_path, "p2.yaml", GOOD_PIPELINE.replace(
        "sources:", "  NEW-01:\n    warc: {path: new/}\nsources:")))
    assert pipeline.section_hash("documents", "LOCAL-01") == more.section_hash(
        "documents", "LOCAL-01")
    assert pipeline.section_hash("documents", "LOCAL-01") != pipeline.section_hash(
        "documents", "CC-MAIN-2024-10")


def test_missing_blocklist_fails_at_load_naming_the_field(tmp_path) -> None:
    text = ("snapshots: {X: {warc: {path: a}}}\n"
            "documents: {url_filter: {domain_blocklist: lists/none.txt}}")
    with pytest.raises(ConfigError,
                       match="documents.url_filter.domain_blocklist: file not found"):
        load_pipeline(_write(tmp_path, "pipeline.yaml", text))


# --- issue 18: what a run needs is caught when the files load -------------------------------


@pytest.mark.parametrize(
    ("text", "field", "suggestion"),
    [
        ("snapshots: {X: {warc: {path: a}}}\nqualty: {training_snapshots: [X]}", "qualty",
         "did you mean 'quality'?"),
        ("snapshots: {X: {warc: {path: a}}}\ndocuments: {url_filtr: {}}",
         "documents.url_filtr", "did you mean 'url_filter'?"),
        ("snapshots: {X: {warc: {pth: a}}}", "snapshots.X.warc.LocalWarcInput.pth",
         "did you mean 'path'?"),
        ("snapshots: {X: {warc: {path: a}}}\nsources: {b: {path: p, licence: x, formt: text}}",
         "sources.b.formt", "did you mean 'format'?"),
    ],
)
def test_a_mistyped_pipeline_key_gets_a_did_you_mean(tmp_path, text, field, suggestion) -> None:
    with pytest.raises(ConfigError) as error:
        load_pipeline(_write(tmp_path, "pipeline.yaml", text))
    assert f"{field}: Extra inputs are not permitted; {suggestion}" in str(error.value)


def test_a_mistyped_recipe_key_gets_a_did_you_mean(tmp_path) -> None:
    pipeline = load_pipeline(_write(tmp_path, "pipeline.yaml", GOOD_PIPELINE))
    with pytest.raises(ConfigError, match=r"r1.yaml: selectoin: .*did you mean 'selection'\?"):
        load_recipe(_recipe(tmp_path, RECIPE + "selectoin: {languages: [en]}\n"), pipeline)


def test_a_language_name_fails_naming_the_field_and_its_code(tmp_path) -> None:
    pipeline_text = GOOD_PIPELINE.replace("languages: [en]", "languages: [English]")
    with pytest.raises(ConfigError, match=r"documents.languages: .*did you mean 'en'\?"):
        load_pipeline(_write(tmp_path, "pipeline.yaml", pipeline_text))
    pipeline = load_pipeline(_write(tmp_path, "pipeline.yaml", GOOD_PIPELINE))
    recipe = _recipe(tmp_path, RECIPE + "selection: {languages: [english, german]}\n")
    with pytest.raises(ConfigError) as error:
        load_recipe(recipe, pipeline)
    assert str(error.value) == (f"{recipe}: selection.languages: 'english' is not an ISO 639 "
                                "language code such as 'en'; did you mean 'en'?")


def test_a_recipe_name_other_than_its_file_name_fails_naming_both(tmp_path) -> None:
    (tmp_path / "tok.json").write_text("{}")
    pipeline = load_pipeline(_write(tmp_path, "pipeline.yaml", GOOD_PIPELINE))
    with pytest.raises(ConfigError, match=r"r2.yaml: name: 'r1' differs from the file name "
                       r"'r2.yaml'.*set name: r2 or rename the file to r1.yaml"):
        load_recipe(_write(tmp_path, "r2.yaml", RECIPE), pipeline)


def test_a_missing_tokenizer_file_fails_at_load_naming_the_resolved_path(tmp_path) -> None:
    pipeline = load_pipeline(_write(tmp_path, "pipeline.yaml", GOOD_PIPELINE))
    recipe = _recipe(tmp_path, RECIPE.replace("path: tok.json", "path: tokenizers/tok.jsn"))
    with pytest.raises(ConfigError) as error:
        load_recipe(recipe, pipeline)
    assert f"tokenizer.path: file not found: {tmp_path.resolve() / 'tokenizers/tok.jsn'}" in \
        str(error.value)


NO_POSITIVE = GOOD_PIPELINE + "quality: {training_snapshots: [LOCAL-01]}\n"


@pytest.mark.parametrize("pipeline_text", [GOOD_PIPELINE, NO_POSITIVE],
                         ids=["no-quality-section", "no-positive-source"])
@pytest.mark.parametrize(
    ("recipe_text", "field"),
    [
        (RECIPE + "selection: {quality_top_fraction: 0.5}\n", "selection.quality_top_fraction"),
        (RECIPE + "cluster_policy: quality\n", "cluster_policy"),
        (RECIPE.replace("{books: 1.0}", "{books: 1.0}, quality_top_fraction: 0.3"),
         "phases.anneal.quality_top_fraction"),
    ],
)
def test_a_recipe_using_scores_needs_a_classifier(tmp_path, pipeline_text, recipe_text,
                                                  field) -> None:
    pipeline = load_pipeline(_write(tmp_path, "pipeline.yaml", pipeline_text))
    assert pipeline.classifier_skipped()
    with pytest.raises(ConfigError, match=rf"r1.yaml: {field}: needs quality scores, but the "
                       "classifier is skipped"):
        load_recipe(_recipe(tmp_path, recipe_text), pipeline)
    # With a positive source and a quality section the same recipe loads.
    positive = load_pipeline(_write(tmp_path, "p2.yaml", NO_POSITIVE.replace(
        "licence: public-domain", "licence: public-domain, classifier_positive: true")))
    assert positive.classifier_skipped() is None
    assert load_recipe(_recipe(tmp_path, recipe_text), positive).name == "r1"
