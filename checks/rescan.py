"""The residual-PII re-scan both `scrubbed` and `mix` gate on: a seeded sample of final text,
scanned by the matcher written apart from the scrubber (`curation.pii_rescan`)."""

from collections.abc import Sequence

from dagster import AssetCheckResult, AssetCheckSeverity, MetadataValue

from curation.pii import PiiSettings
from curation.pii_rescan import residual_pii
from curation.tasks import sample_candidates

RESCAN_DOCUMENTS = 2_000


def sample_texts(doc_ids: Sequence[str], texts: Sequence[str]) -> list[tuple[str, str]]:
    """(doc_id, text) of at most RESCAN_DOCUMENTS documents, chosen by the hash of the doc_id
    (the same choice whatever the order of the rows)."""
    chosen = set(sample_candidates(doc_ids, RESCAN_DOCUMENTS))
    return [(d, t) for d, t in zip(doc_ids, texts, strict=True) if d in chosen]


def residual_pii_result(sample: list[tuple[str, str]], pii: PiiSettings) -> AssetCheckResult:
    found = [(doc_id, hit.kind) for doc_id, text in sample
             for hit in residual_pii(text, pii.enabled, pii.include_private_ips,
                                     pii.placeholders)]
    # Where residual PII was found, never what it is: metadata is visible to every UI user.
    return AssetCheckResult(
        passed=not found, severity=AssetCheckSeverity.ERROR,
        metadata={"documents_scanned": MetadataValue.int(len(sample)),
                  "residual_matches": MetadataValue.int(len(found)),
                  "where": MetadataValue.json([list(row) for row in found[:20]])},
    )
