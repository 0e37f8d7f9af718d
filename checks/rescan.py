"""The residual-PII re-scan both `scrubbed` and `mix` gate on: a seeded sample of final text,
scanned by the matcher written apart from the scrubber (`curation.pii_rescan`)."""

from collections.abc import Iterable, Sequence
from functools import partial

import pyarrow as pa
import pyarrow.compute as pc
from dagster import AssetCheckResult, AssetCheckSeverity, MetadataValue

from curation.executor import map_tasks
from curation.pii import PiiSettings
from curation.pii_rescan import residual_kinds
from curation.tasks import sample_candidates

RESCAN_DOCUMENTS = 2_000


def sample_ids(batches: Iterable[Sequence[str]]) -> set[str]:
    """The doc_ids of at most RESCAN_DOCUMENTS documents among the concatenated `batches`,
    chosen by the hash of the doc_id (the same choice whatever the order of the rows): the
    `sample_candidates` of the whole, holding only the best RESCAN_DOCUMENTS between batches
    (a stable selection of a stable selection's prefix is the selection of the whole)."""
    best: list[str] = []
    for batch in batches:
        best = sample_candidates([*best, *batch], RESCAN_DOCUMENTS)
    return set(best)


def chosen_texts(chosen: set[str], tables: Iterable[pa.Table]) -> list[tuple[str, str]]:
    """(doc_id, text) of the rows of `tables` (doc_id and text columns) whose doc_id is
    `chosen`, in row order; one table at a time is held, and the chosen texts."""
    wanted = pa.array(sorted(chosen), pa.string())
    rows: list[tuple[str, str]] = []
    for table in tables:
        table = table.filter(pc.is_in(table["doc_id"], wanted))
        rows += zip(table["doc_id"].to_pylist(), table["text"].to_pylist(), strict=True)
    return rows


def residual_pii_result(sample: list[tuple[str, str]], pii: PiiSettings,
                        workers: int = 0) -> AssetCheckResult:
    """The re-scan of `sample`, in contiguous batches on `workers` processes (it is pure Python,
    about 1 ms a document: the longest serial step after extraction)."""
    size = max(1, -(-len(sample) // max(1, 2 * workers)))
    batches = [sample[start:start + size] for start in range(0, len(sample), size)]
    scan = partial(residual_kinds, kinds=pii.enabled, include_private_ips=pii.include_private_ips,
                   placeholders=pii.placeholders)
    found = [hit for hits in map_tasks(scan, batches, workers if len(batches) > 1 else 0)
             for hit in hits]
    # Where residual PII was found, never what it is: metadata is visible to every UI user.
    return AssetCheckResult(
        passed=not found, severity=AssetCheckSeverity.ERROR,
        description=f"{len(found)} residual PII matches in a re-scan of {len(sample)} documents"
        + (f" (first in {found[0][0]})" if found else ""),
        metadata={"documents_scanned": MetadataValue.int(len(sample)),
                  "residual_matches": MetadataValue.int(len(found)),
                  "where": MetadataValue.json([list(row) for row in found[:20]])},
    )
