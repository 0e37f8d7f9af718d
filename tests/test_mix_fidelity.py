"""The mix delivers what the recipe asks for (issue 18, items 2 and 3): shares planned on exact
token counts land in the shards within the tolerance, the share gate allows what whole
documents force, and curated sources are judged by their own filter policy. Real text
throughout: article pages, WikiText articles and Project Gutenberg books from ../shared/data,
with real language and heuristics verdicts and the GPT-2 tokenizer."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from curation.config import LanguageSettings, PipelineConfig, RecipeConfig
from curation.heuristics import annotate
from curation.language import identify
from curation.mix import build_mix, delivered_tokens, share_failures
from curation.partition import Manifest, PartitionLayout
from curation.shards import BuildInfo
from curation.stages.dataset import build_and_store_mix, build_dataset_shards, read_occurrences
from curation.storage import LocalStore
from curation.tokenizer import PinnedTokenizer, tokenizer_from_bytes

WEB = "WEB-01"
TOLERANCE = 0.01
CLUSTER_SCHEMA = pa.schema([("doc_id", pa.string()), ("cluster_id", pa.string()),
                            ("cluster_size", pa.int64()), ("kept_doc_id", pa.string()),
                            ("keep", pa.bool_())])


# --- real text -------------------------------------------------------------------------------


def article_pages(shared: Path) -> list[str]:
    """The gold main text of 181 real article pages (about 20 not in English)."""
    truth = json.loads((shared / "html_extraction" / "article-extraction-benchmark" /
                        "ground-truth.json").read_text(encoding="utf-8"))
    return [truth[key]["articleBody"] for key in sorted(truth) if truth[key]["articleBody"]]


def wiki_articles(shared: Path) -> list[str]:
    """The 62 WikiText-2 test articles, one text each (split at their ` = Title = ` lines)."""
    raw = (shared / "sources" / "wikipedia" / "wikitext-2-raw_wiki.test.raw").read_text(
        encoding="utf-8")
    parts = re.split(r"(?m)^ = (?!=)(.+?) = \s*$", raw)
    return [f"{title}\n{body.strip()}" for title, body in zip(parts[1::2], parts[2::2],
                                                               strict=True)]


def books(shared: Path) -> list[str]:
    """Seven Project Gutenberg books and plays (Windows-1252), 90k to 355k GPT-2 tokens each."""
    folder = shared / "sources" / "books_gutenberg"
    return [path.read_bytes().decode("cp1252") for path in sorted(folder.glob("*.txt"))]


# --- the annotated partitions the mix reads --------------------------------------------------


def _write(store: LocalStore, asset: str, partition: str, part: pa.Table,
           **side: pa.Table) -> None:
    layout = PartitionLayout(store, asset, partition)
    tables = {name: [layout.write_table(name, 0, table)] for name, table in side.items()}
    layout.write_manifest(Manifest(asset, partition, "v1", [layout.write_part(0, part)], tables))


def write_partition(store: LocalStore, partition: str, texts: list[str]) -> None:
    """Every per-partition asset the mix reads, with the real language verdict (lid.176 under
    the pipeline's default settings) and the real heuristics verdict of each text."""
    source = partition.removeprefix("source:") if partition.startswith("source:") else "web"
    ids = [f"{source}-{i:04d}" for i in range(len(texts))]
    settings = LanguageSettings()
    languages, scores = identify(texts)
    language_keep = [lang in settings.languages and score >= settings.threshold_for(lang)
                     for lang, score in zip(languages, scores, strict=True)]
    heuristics = annotate(list(zip(texts, languages, strict=True)))
    nulls = pa.nulls(len(ids), pa.string())
    _write(store, "documents", partition, pa.table({
        "doc_id": ids, "source": [source] * len(ids), "url": [f"https://x/{d}" for d in ids],
        "snapshot": pa.array([WEB if source == "web" else None] * len(ids), pa.string()),
        "licence": nulls if source == "web" else pa.array(["public"] * len(ids)),
        "text": texts}))
    _write(store, "language", partition, pa.table({
        "doc_id": ids, "language": languages, "keep": language_keep}))
    _write(store, "heuristics", partition, pa.table({"doc_id": ids, "keep": heuristics.keep}))
    _write(store, "decontaminated", partition, pa.table({
        "doc_id": ids, "contaminated": [False] * len(ids), "items": [0] * len(ids)}))
    _write(store, "scrubbed", partition, pa.table({"doc_id": ids, "text": texts}),
           decisions=pa.table({"doc_id": nulls.slice(0, 0), "stage": nulls.slice(0, 0),
                               "reason": nulls.slice(0, 0)}))
    for asset in ("url_dedup", "exact_dedup", "dedup_clusters"):
        _write(store, asset, partition, CLUSTER_SCHEMA.empty_table())


def pipeline(**sources: dict) -> PipelineConfig:
    return PipelineConfig.model_validate({
        "snapshots": {WEB: {"warc": {"path": "warc/"}}},
        "sources": {name: {"path": f"{name}/", "format": "text", "licence": "public", **extra}
                    for name, extra in sources.items()}})


def recipe(name: str, source: str, weights: dict[str, float], **extra) -> RecipeConfig:
    return RecipeConfig.model_validate({
        "name": name, "snapshots": [WEB], "sources": [source],
        "selection": {"languages": ["en"]},
        "phases": [{"name": "main", "fraction": 1.0, "weights": weights}],
        "tokenizer": {"path": "gpt2/tokenizer.json"}, "seq_len": 512, "seed": 11, **extra})


@pytest.fixture(scope="module")
def gpt2(shared_data: Path) -> PinnedTokenizer:
    path = shared_data / "tokenizers" / "gpt2" / "tokenizer.json"
    return tokenizer_from_bytes(path.read_bytes(), name="gpt2")


@pytest.fixture(scope="module")
def store(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> LocalStore:
    store = LocalStore(str(tmp_path_factory.mktemp("fidelity")))
    write_partition(store, WEB, article_pages(shared_data))
    write_partition(store, "source:wiki", wiki_articles(shared_data))
    write_partition(store, "source:books", books(shared_data))
    _write(store, "cross_dedup", "all", CLUSTER_SCHEMA.empty_table())
    return store


def shards_manifest(store: LocalStore, config: PipelineConfig, mix: RecipeConfig,
                    tokenizer: PinnedTokenizer) -> dict:
    """The mix, then the shards built from it: the manifest the share gate reads."""
    build_and_store_mix(store, mix.name, mix, tokenizer, config)
    info = BuildInfo(f"v-{mix.name}", recipe_hash="recipe", pipeline_hash="pipeline")
    return build_dataset_shards(store, mix.name, mix, read_occurrences(store, mix.name),
                                tokenizer, info, threads=1).manifest


def delivered_shares(manifest: dict) -> dict[str, float]:
    tokens = manifest["tokens_by_phase_source"]["main"]
    return {source: count / sum(tokens.values()) for source, count in tokens.items()}


# --- item 2: the shards deliver the planned shares -------------------------------------------


@pytest.mark.parametrize("web_weight", [0.8, 0.9])
def test_delivered_shares_are_on_target(store, gpt2, web_weight: float) -> None:
    """Web pages (a tenth of them not English, so the selected ones tokenize unlike the
    partition's average) and WikiText articles (spaced punctuation, ` @-@ `): the per-source
    bytes-per-token calibration delivered 74.6% and 87.0% web here while its gate passed on the
    estimates; exact counts deliver the plan."""
    config = pipeline(wiki={})
    mix = recipe(f"web{int(web_weight * 100)}", "wiki",
                 {"web": web_weight, "wiki": round(1 - web_weight, 2)})
    manifest = shards_manifest(store, config, mix, gpt2)
    shares = delivered_shares(manifest)
    assert abs(shares["web"] - web_weight) <= TOLERANCE, shares
    mixed = PartitionLayout(store, "mix", mix.name)
    planned = mixed.read_table(name="shares")
    assert share_failures(planned, TOLERANCE,
                          delivered_tokens(manifest["tokens_by_phase_source"])) == []
    # one total: the mix's exact count is what the shards hold (EOS included, no padding)
    assert mixed.complete_manifest().extra["delivered_tokens"] == \
        manifest["totals"]["tokens"] == sum(manifest["tokens_by_source"].values())
    assert {row["source"]: row["achieved_tokens"] for row in planned.to_pylist()} == \
        manifest["tokens_by_phase_source"]["main"]


# --- item 3b: whole documents ----------------------------------------------------------------


def test_seven_books_pass_as_close_as_whole_books_allow(store, gpt2) -> None:
    """Books of 90k to 355k tokens cannot make 20% of the phase to within a point; the gate
    passes when the miss is within what whole documents allow (half the largest document of
    each source, over the phase), and says so when it is not."""
    config = pipeline(books={})
    mix = recipe("books", "books", {"web": 0.8, "books": 0.2}, max_epochs=10)
    manifest = shards_manifest(store, config, mix, gpt2)
    shares = delivered_shares(manifest)
    planned = PartitionLayout(store, "mix", "books").read_table(name="shares")
    phase_tokens = sum(manifest["tokens_by_phase_source"]["main"].values())
    granularity = sum(row["largest_document_tokens"] for row in planned.to_pylist()) / 2 \
        / phase_tokens
    off = abs(shares["books"] - 0.2)
    assert TOLERANCE < off <= TOLERANCE + granularity, (shares, granularity)
    delivered = delivered_tokens(manifest["tokens_by_phase_source"])
    assert share_failures(planned, TOLERANCE, delivered) == []
    # the same miss without the allowance for whole documents is a failure naming the reason
    whole = planned.set_column(planned.schema.get_field_index("largest_document_tokens"),
                               "largest_document_tokens",
                               pa.array([0] * planned.num_rows, pa.int64()))
    failures = share_failures(whole, TOLERANCE, delivered)
    assert failures and failures[0].startswith("phase main: source books has ")


# --- item 3c: curated sources keep their documents -------------------------------------------


def test_curated_sources_keep_their_articles_and_books(store) -> None:
    """WikiText's spaced punctuation and the books' Gutenberg front matter trip the web
    heuristics; under `filters: curated` (the default) every article and book is selected,
    under `filters: web` the heuristics drop them as they would drop web pages."""
    for source, count in (("wiki", 62), ("books", 7)):
        mix = recipe(f"policy-{source}", source, {"web": 0.5, source: 0.5})
        verdicts = PartitionLayout(store, "heuristics", f"source:{source}").read_table()
        dropped_by_heuristics = verdicts.num_rows - sum(verdicts["keep"].to_pylist())
        assert dropped_by_heuristics > 0
        curated = build_mix(store, mix, curated_sources=[source]).decisions
        rules = Counter(row["rule"] for row in curated.to_pylist()
                        if row["doc_id"].startswith(source))
        assert rules == {"selected": count}
        judged_as_web = build_mix(store, mix).decisions
        rules = Counter(row["rule"] for row in judged_as_web.to_pylist()
                        if row["doc_id"].startswith(source))
        assert rules["heuristics"] + rules["language"] >= dropped_by_heuristics
    assert pipeline(books={}).sources["books"].filters == "curated"
