"""The pluggable language-ID model (curation/language_models.py, `language.model`): lid.176 stays
the default, py3langid (weights in its wheel) can be chosen, both read Tatoeba's labelled
sentences, and the stage's version follows the model."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from benchmarks.language_id_models import tatoeba_items
from curation.config import DocumentsSettings, LanguageSettings
from curation.language_models import identify, model_sha256
from curation.partition import PartitionLayout
from curation.stages.base import DocumentsInput
from curation.stages.documents import run_documents
from curation.stages.language import run_language
from curation.storage import LocalStore
from tests.conftest import require_shared_data

WARC = "warc/non_cc/dolma_wget-sample-0001_15responses.warc.gz"
LANGUAGES = {"en", "de", "fr", "es", "ja", "zh", "th", "ru"}


@pytest.fixture(scope="module")
def tatoeba() -> list[tuple[str, str]]:
    require_shared_data()
    return [(item.text, item.gold) for item in tatoeba_items() if item.gold in LANGUAGES]


@pytest.mark.parametrize("model", ["lid176", "py3langid"])
def test_each_model_reads_the_tatoeba_sentences_of_eight_languages(tatoeba, model: str) -> None:
    labels, scores = identify([text for text, _ in tatoeba], model)
    right = sum(label == gold for label, (_, gold) in zip(labels, tatoeba, strict=True))
    assert len(tatoeba) > 40 and right / len(tatoeba) >= 0.95, (model, right, len(tatoeba))
    assert all(0.0 <= score <= 1.0 for score in scores)


def test_the_stage_runs_the_chosen_model_and_versions_by_its_weights(tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path))
    run_documents("DOLMA", [str(require_shared_data() / WARC)], store, DocumentsSettings(),
                  workers=0)
    documents = DocumentsInput(store, "DOLMA")
    found = {}
    for model in ("lid176", "py3langid"):
        result = run_language(documents, LanguageSettings(model=model), 0)
        table = PartitionLayout(store, "language", "DOLMA").read_table()
        found[model] = (result.manifest.version, table["language"].to_pylist())
    assert found["lid176"][0] != found["py3langid"][0]
    agree = sum(a == b for a, b in zip(found["lid176"][1], found["py3langid"][1], strict=True))
    assert agree / len(found["lid176"][1]) >= 0.8  # English pages: both say en
    assert model_sha256("lid176") != model_sha256("py3langid")


def test_an_unknown_model_fails_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="model"):
        LanguageSettings(model="cld3")
