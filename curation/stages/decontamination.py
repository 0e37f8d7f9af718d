"""The `eval_suite` and `decontaminated` stages.

`eval_suite` loads the benchmark files `pipeline.yaml` lists and stores their n-gram index
(`curation.decontamination.EvalIndex`) under a version that is the content hash of the files
and settings, so the same files always give the same index and a changed file re-pins it.
`decontaminated[snapshot]` scans each `documents` part against that index: one row per
document, one `hits` row and one decision row per (document, eval item) found, naming the
benchmark, the item and the first matched span.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from curation.code import CODE_VERSION
from curation.decontamination import (
    DecontaminationSettings,
    EvalIndex,
    Hit,
    hits_table,
    index_metadata,
    suite_hash,
)
from curation.evals import load_benchmarks
from curation.graph import ALL, DECONTAMINATED, DOCUMENTS, EVAL_SUITE
from curation.partition import Manifest, PartitionLayout
from curation.stages.base import AnnotateStage, Annotation, DocumentsInput, Drop
from curation.storage import Store
from curation.tasks import PartitionResult

ASSET = DECONTAMINATED
SUITE_PARTITION = ALL
CONTAMINATED = "contaminated"
KERNEL_VERSION = "decontaminated-1"
SPAN_CHARS = 200  # of the matched text quoted in a decision's detail

DECONTAMINATED_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("contaminated", pa.bool_(), nullable=False),
        pa.field("items", pa.int32(), nullable=False),
        pa.field("benchmarks", pa.list_(pa.string()), nullable=False),
    ]
)


@dataclass(frozen=True)
class SuiteBuild:
    manifest: Manifest
    metadata: dict[str, Any]
    rebuilt: bool


def build_eval_suite(store: Store, settings: DecontaminationSettings) -> SuiteBuild:
    """The eval suite's index, built only when its pinned version changed."""
    version = suite_hash(settings)[:16]
    layout = PartitionLayout(store, EVAL_SUITE, SUITE_PARTITION)
    manifest = layout.read_manifest()
    if manifest is not None and manifest.version == version:
        return SuiteBuild(manifest, manifest.extra["index"], rebuilt=False)
    layout.prepare(version)
    items = load_benchmarks(settings.benchmarks)
    index = EvalIndex.build(items, settings.ngram)
    tables = index.to_tables()
    metadata = index_metadata(index)
    stored = {"ngrams": [layout.write_table("ngrams", 0, tables["ngrams"])]}
    code_names = {spec.name for spec in settings.benchmarks if spec.is_code}
    if code_names:  # code items' tokens, for code sources (`DecontaminateWork.code`)
        code = EvalIndex.build([item for item in items if item.benchmark in code_names],
                               settings.code_ngram, "code")
        for name, table in code.to_tables().items():
            stored[f"code_{name}"] = [layout.write_table(f"code_{name}", 0, table)]
        metadata["code_index"] = index_metadata(code)
    manifest = Manifest(EVAL_SUITE, SUITE_PARTITION, version,
                        [layout.write_part(0, tables["items"])], tables=stored,
                        extra={"index": metadata})
    layout.write_manifest(manifest)
    return SuiteBuild(manifest, metadata, rebuilt=True)


_LOADED: dict[tuple[str, str, bool], EvalIndex | None] = {}


def load_eval_index(store: Store, code: bool = False) -> EvalIndex | None:
    """The stored index (`code`: of the code benchmarks' code tokens, None when there are
    none), read once per process and version (every task of a worker uses it)."""
    layout = PartitionLayout(store, EVAL_SUITE, SUITE_PARTITION)
    manifest = layout.complete_manifest()
    key = (store.uri(layout.prefix), manifest.data_version, code)
    if key not in _LOADED:
        if len(_LOADED) > 1:
            _LOADED.clear()
        if not code:
            _LOADED[key] = EvalIndex.from_tables(layout.read_table(name="ngrams"),
                                                 layout.read_table())
        elif manifest.table_parts("code_ngrams"):
            _LOADED[key] = EvalIndex.from_tables(layout.read_table(name="code_ngrams"),
                                                 layout.read_table(name="code_items"))
        else:
            _LOADED[key] = None
    return _LOADED[key]


def _drop(doc_id: str, hit: Hit) -> Drop:
    detail = {"benchmark": hit.benchmark, "item_id": hit.item_id, "start": hit.start,
              "end": hit.end, "text": hit.text[:SPAN_CHARS]}
    return Drop(doc_id, CONTAMINATED, float(hit.ngrams), json.dumps(detail, ensure_ascii=False))


@dataclass(frozen=True)
class DecontaminateWork(AnnotateStage):
    """One drop per (document, eval item) hit; the stats count contaminated documents."""

    min_hits: int
    code: bool = False

    asset = ASSET
    reported_reasons = (CONTAMINATED,)

    def annotate(self, index: int, table: pa.Table) -> Annotation:
        doc_ids = table["doc_id"].to_pylist()
        hits = self._hits(table["text"].to_pylist())
        per_doc: dict[int, list[Hit]] = {}
        for hit in hits:
            per_doc.setdefault(hit.doc, []).append(hit)
        rows = [{"doc_id": doc_id, "contaminated": doc in per_doc,
                 "items": len(per_doc.get(doc, [])),
                 "benchmarks": sorted({h.benchmark for h in per_doc.get(doc, [])})}
                for doc, doc_id in enumerate(doc_ids)]
        documents_per_benchmark = Counter(b for row in rows for b in row["benchmarks"])
        counts = {f"documents.{b}": n for b, n in documents_per_benchmark.items()}
        counts |= {f"hits.{b}": n for b, n in Counter(h.benchmark for h in hits).items()}
        return Annotation(pa.Table.from_pylist(rows, DECONTAMINATED_SCHEMA),
                          [_drop(doc_ids[h.doc], h) for h in hits],
                          {"hits": hits_table(hits, doc_ids)}, counts)


    def _hits(self, texts: list[str]) -> list[Hit]:
        """Every document's hits in the word index and, in a code source, in the code index
        too (an item found both ways counts once, as the word index found it)."""
        indexes = [load_eval_index(self.documents.store)]
        if self.code:
            indexes.append(load_eval_index(self.documents.store, code=True))
        hits: list[Hit] = []
        for doc, text in enumerate(texts):
            found: dict[tuple[str, str], Hit] = {}
            for eval_index in filter(None, indexes):
                for hit in eval_index.document_hits(doc, text, self.min_hits):
                    found.setdefault((hit.benchmark, hit.item_id), hit)
            hits += sorted(found.values(), key=lambda h: (h.start, h.benchmark, h.item_id))
        return hits


def run_decontaminated(documents: DocumentsInput, settings: DecontaminationSettings,
                       workers: int, on_task_done: Any = None, code: bool = False
                       ) -> PartitionResult:
    """The stage over one partition; `code`: a code source's, also scanned in code tokens."""
    suite = PartitionLayout(documents.store, EVAL_SUITE, SUITE_PARTITION).complete_manifest()
    inputs = {"kernel": KERNEL_VERSION, "min_hits": settings.min_hits,
              DOCUMENTS: documents.data_version(), EVAL_SUITE: suite.data_version}
    if code:
        inputs["code"] = CODE_VERSION
    return DecontaminateWork(documents, settings.min_hits, code).run(inputs, workers,
                                                                     on_task_done)
