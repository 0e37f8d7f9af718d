"""Near-duplicate recall and false removal per Jaccard band, FineWeb parity against the
verified default (issue 21, item 3).

    .venv/bin/python benchmarks/near_dup_recall.py [--families 75] [--per-band 2]
                                                   [--synthetic 200000]

1. The labelled set (`benchmarks/near_dup_labels.py`): real article bodies inside the built-in
   sample's site templates, template copies and edited variants at known main-text Jaccard
   (word 5-grams), extracted and signed by the pipeline's code.
2. Each setting clusters it with `curation.dedup.cluster_near_duplicates` (the one-session
   form of `dedup_clusters`; the exchange path gives the same bytes,
   tests/test_dedup_exchange.py) in two ways: **corpus**, every page in one partition (chains
   through the family's other pages count, as in production), and **pair**, each labelled pair
   alone (the pair's own chance, no help from its family). A pair is merged when both pages
   land in one cluster. Recall: merged share of pairs at main-text Jaccard >= 0.8; false
   removal: merged share at <= 0.5 (and of unrelated articles).
3. Across partitions: the same pairs split over two partitions of `CrossIndex`, as
   `cross_dedup` links them (parity: unverified 14x8 links; default: verified).
4. Cost: candidate pairs per document (counted once per band bucket, and distinct) and edges
   per document on the labelled corpus; then on `--synthetic` random signatures (a tenth in
   near-duplicate families) the clustering time per document of each setting in one session,
   the exchange bytes a document costs (band rows; with verification also its signature once
   and the candidate pairs twice; and the design not taken, the signature on every band row),
   and the `dedup_clusters` stage itself (`ClusterWork`, the exchange path) per document.
5. Prints the tables and writes them to `benchmarks/results/near_dup_recall.md`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.near_dup_labels import (  # noqa: E402
    BANDS,
    LabelledSet,
    Pair,
    build,
    without_boilerplate,
)
from curation.config import DedupSettings  # noqa: E402
from curation.dedup import (  # noqa: E402
    BAND_ROWS_SCHEMA,
    PAIR_SCHEMA,
    SIGNED_PAIR_SCHEMA,
    CrossIndex,
    Verification,
    bands_of,
    candidate_pairs_sql,
    cluster_near_duplicates,
    rebanded_columns,
    rebanded_rows,
    signature_table,
)
from curation.duck import duckdb_session  # noqa: E402
from curation.exchange import scratch_bytes  # noqa: E402
from curation.graph import DEDUP_CLUSTERS, DOCUMENTS, MINHASH_SIGNATURES  # noqa: E402
from curation.minhash import (  # noqa: E402
    MinHashSettings,
    band_hashes,
    jaccard,
    shingle_hashes,
    signatures_table,
)
from curation.partition import Manifest, PartitionLayout  # noqa: E402
from curation.stages.base import DocumentsInput  # noqa: E402
from curation.stages.dedup import ClusterWork  # noqa: E402
from curation.storage import LocalStore  # noqa: E402
from curation.text import split_text  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data"
RESULTS = REPO / "benchmarks" / "results" / "near_dup_recall.md"
SETTINGS: dict[str, DedupSettings] = {
    "FineWeb parity (14x8, no verification)": DedupSettings(near_dup_verification="none"),
    "default (28x4, signature >= 0.6)": DedupSettings(),
    "14x8, signature >= 0.6": DedupSettings(near_dup_bands=14, near_dup_rows=8),
    "28x4, signature >= 0.7": DedupSettings(near_dup_threshold=0.7),
    "28x4, signature >= 0.5": DedupSettings(near_dup_threshold=0.5),
}
READING = """How to read it: "pair" is each labelled pair's own chance of being merged, "corpus"
adds the chains through the family's other pages. FineWeb's 14x8 misses pairs because they are not
candidates (its [0.8, 0.9) row with verification is the same as without); 28x4 makes almost
every pair above 0.7 a candidate, and verification keeps the chains from merging unrelated
pages. Extraction inside other templates lowers a pair's Jaccard (in-article boilerplate
lines, chrome that survives: the "extracted" column), so a verification threshold of 0.7 loses
close pairs and 0.5 starts merging pairs at <= 0.5; 0.6 is the default. The rows "text
without line_dedup's lines" sign the texts less the lines line_dedup's rule finds frequent in
the set, as signatures taken after line_dedup would: recall falls, because an article copied
onto more than `line_max_documents` pages has its own paragraphs removed with the boilerplate,
so the pipeline keeps signing the extracted text. Timings are on a shared 2-core machine."""


def band_label(pair: Pair) -> str:
    if pair.kind == "unrelated":
        return "unrelated articles"
    if pair.kind == "template copy":
        return "1.0 (same text, other template)"
    low, high = next((lo, hi) for lo, hi in BANDS if lo <= pair.jaccard < hi)
    return f"[{low:.1f}, {high:.1f})"


def cluster_of(table: pa.Table, settings: DedupSettings) -> tuple[dict[str, str], dict]:
    clusters = cluster_near_duplicates(table, max_bucket_size=settings.max_bucket_size,
                                       verification=settings.verification())
    ids = clusters.table["doc_id"].to_pylist()
    return dict(zip(ids, clusters.table["cluster_id"].to_pylist(), strict=True)), \
        {"candidates": clusters.stats.candidates, "edges": clusters.stats.edges}


def merged_corpus(labelled: LabelledSet, settings: DedupSettings) -> tuple[list[bool], dict]:
    cluster, stats = cluster_of(labelled.signatures, settings)
    return [cluster.get(p.a, p.a) == cluster.get(p.b, p.b) for p in labelled.pairs], stats


def merged_pairs(labelled: LabelledSet, settings: DedupSettings) -> list[bool]:
    """Each pair alone: pairs are batched so that no article occurs twice in a batch (the
    k-th pair of every family together; unrelated pairs by even and odd family), which is
    the same as clustering each pair on its own, at a few calls instead of one per pair."""
    rows = {doc_id: i for i, doc_id in enumerate(labelled.signatures["doc_id"].to_pylist())}
    batches: dict[tuple[str, int], list[int]] = {}
    seen: dict[int, int] = {}
    for index, pair in enumerate(labelled.pairs):
        family = int(pair.a[1:4])
        if pair.kind == "unrelated":
            key = ("unrelated", family % 2)
        else:
            seen[family] = seen.get(family, 0) + 1
            key = ("family", seen[family])
        batches.setdefault(key, []).append(index)
    merged = [False] * len(labelled.pairs)
    for indices in batches.values():
        docs = sorted({rows[d] for i in indices for d in (labelled.pairs[i].a,
                                                            labelled.pairs[i].b)})
        cluster, _ = cluster_of(labelled.signatures.take(docs), settings)
        for i in indices:
            pair = labelled.pairs[i]
            merged[i] = cluster.get(pair.a, pair.a) == cluster.get(pair.b, pair.b)
    return merged


def cross_partition_merged(labelled: LabelledSet, settings: DedupSettings,
                           folder: Path) -> tuple[list[Pair], list[bool]]:
    """The labelled pages over two partitions (each pair's first page in the first), linked by
    `CrossIndex` as `cross_dedup` links them with `dedup.cross_near_duplicates`: the pairs that
    span both partitions and whether each was merged."""
    first = {pair.a for pair in labelled.pairs}
    verification = settings.verification()
    table = labelled.signatures
    keys = (rebanded_columns(table, verification) if verification else
            table.select(["doc_id", *bands_of(table.column_names)]))
    in_first = pa.array([doc_id in first for doc_id in keys["doc_id"].to_pylist()])
    index = CrossIndex(folder, max_bucket_size=settings.max_bucket_size,
                       verification=verification)
    index.add_partition("a", keys.filter(in_first))
    index.add_partition("b", keys.filter(pc.invert(in_first)))
    clusters = index.clusters().table
    cluster = dict(zip(clusters["doc_id"].to_pylist(), clusters["cluster_id"].to_pylist(),
                       strict=True))
    spanning = [p for p in labelled.pairs if p.b not in first]
    return spanning, [cluster.get(p.a, p.a) == cluster.get(p.b, p.b) for p in spanning]


def cross_table(labelled: LabelledSet) -> str:
    """Recall and false removal of the cross-partition links, parity against the default."""
    lines = ["| setting | spanning pairs | recall (Jaccard >= 0.8) | false removal (<= 0.5) |",
             "| --- | ---: | ---: | ---: |"]
    for name in ("FineWeb parity (14x8, no verification)", "default (28x4, signature >= 0.6)"):
        with tempfile.TemporaryDirectory() as folder:
            pairs, merged = cross_partition_merged(labelled, SETTINGS[name], Path(folder))
        high = [m for m, p in zip(merged, pairs, strict=True)
                if p.kind != "unrelated" and p.jaccard >= 0.8]
        low = [m for m, p in zip(merged, pairs, strict=True) if p.jaccard <= 0.5]
        lines.append(f"| {name} | {len(pairs)} | {share(high)} | {share(low)} |")
    return "\n".join(lines)


@dataclass
class Outcome:
    corpus: list[bool]
    pair: list[bool]
    stats: dict


def share(flags: Sequence[bool]) -> str:
    return f"{np.mean(flags):.3f}" if flags else "-"


def band_table(labelled: LabelledSet, outcomes: dict[str, Outcome]) -> str:
    labels = ["1.0 (same text, other template)",
              *(f"[{lo:.1f}, {hi:.1f})" for lo, hi in BANDS), "unrelated articles"]
    texts = {page.doc_id: page.text for page in labelled.pages}
    shingles = {doc_id: shingle_hashes(split_text(text), MinHashSettings())
                for doc_id, text in texts.items()}
    extracted = [jaccard(shingles[p.a], shingles[p.b]) for p in labelled.pairs]
    names = list(outcomes)
    head = "| main-text Jaccard | pairs | extracted: mean (min) | " + " | ".join(
        f"{name}: corpus / pair" for name in names) + " |"
    lines = [head, "|" + "---|" * (3 + len(names))]
    for label in labels:
        indices = [i for i, p in enumerate(labelled.pairs) if band_label(p) == label]
        cells = [f"{share([o.corpus[i] for i in indices])} / {share([o.pair[i] for i in indices])}"
                 for o in outcomes.values()]
        values = [extracted[i] for i in indices]
        spread = f"{np.mean(values):.3f} ({min(values):.3f})" if values else "-"
        lines.append(f"| {label} | {len(indices)} | {spread} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary_table(labelled: LabelledSet, outcomes: dict[str, Outcome]) -> str:
    high = [i for i, p in enumerate(labelled.pairs) if p.kind != "unrelated" and p.jaccard >= 0.8]
    low = [i for i, p in enumerate(labelled.pairs) if p.jaccard <= 0.5]
    docs = labelled.signatures.num_rows
    lines = ["| setting | recall at >= 0.8: corpus / pair | false removal at <= 0.5: corpus /"
             " pair | candidate pairs / doc (per band bucket; distinct) | edges / doc |",
             "|---|---|---|---|---|"]
    for name, o in outcomes.items():
        candidates = (f"{o.stats['candidates'] / docs:.2f}; {o.stats['distinct'] / docs:.2f}"
                      if o.stats["candidates"] else "- (every candidate is an edge)")
        lines.append(
            f"| {name} | {share([o.corpus[i] for i in high])} / {share([o.pair[i] for i in high])}"
            f" | {share([o.corpus[i] for i in low])} / {share([o.pair[i] for i in low])}"
            f" | {candidates} | {o.stats['edges'] / docs:.2f} |")
    return "\n".join(lines) + (f"\n\n{len(high)} pairs at >= 0.8, {len(low)} at <= 0.5, "
                               f"{docs} documents.")


def synthetic_signatures(documents: int, seed: int = 0) -> tuple[pa.Table, MinHashSettings]:
    """Random 112-row signatures, a tenth of the documents in families of 2 to 5 whose members
    keep each row of the family's signature with probability 0.5 to 1 (Jaccard 0.5 to 1)."""
    settings = MinHashSettings()
    rng = np.random.default_rng(seed)
    sigs = rng.integers(0, 2**63, size=(documents, settings.permutations), dtype=np.uint64)
    start = 0
    while start < documents // 10:
        size = int(rng.integers(2, 6))
        for member in range(start + 1, min(start + size, documents)):
            keep = rng.random(settings.permutations) < rng.uniform(0.5, 1.0)
            sigs[member, keep] = sigs[start, keep]
        start += size
    ids = [f"d{i:08d}" for i in range(documents)]
    return signatures_table(ids, band_hashes(sigs, settings), sigs), settings


def distinct_candidates(table: pa.Table, verification: Verification) -> int:
    """Distinct candidate pairs of the verified banding (the pairs the verification rounds
    compare; `ClusterStats.candidates` counts a pair once per band bucket)."""
    with duckdb_session() as con:
        con.register("rows", rebanded_rows(table, verification))
        candidate_pairs_sql(con, "rows", 10_000, verification.window)
        return int(con.sql("SELECT count(*) FROM pairs").fetchall()[0][0])


def exchanged_bytes(table: pa.Table, verification: Verification | None) -> int:
    """Bytes the exchange objects of `table`'s documents take (lz4 Parquet, as written):
    band rows; with verification also each signature once and the candidate pairs twice
    (plain, then with their first document's signature)."""
    if verification is None:
        return len(scratch_bytes(long_rows(table)))
    total = len(scratch_bytes(rebanded_rows(table, verification)))
    total += len(scratch_bytes(signature_table(table)))
    with duckdb_session() as con:
        con.register("rows", rebanded_rows(table, verification))
        con.register("sigs", signature_table(table))
        candidate_pairs_sql(con, "rows", 10_000, verification.window)
        pairs = con.sql("SELECT * FROM pairs").to_arrow_table().cast(PAIR_SCHEMA)
        signed = con.sql("SELECT p.*, s.signature FROM pairs p JOIN sigs s USING (doc_id)"
                         ).to_arrow_table().cast(SIGNED_PAIR_SCHEMA)
    return total + len(scratch_bytes(pairs)) + len(scratch_bytes(signed))


def cost_table(documents: int) -> str:
    table, _ = synthetic_signatures(documents)
    lines = ["| setting | clustering s | us / doc | candidate pairs / doc (per band bucket;"
             " distinct) | edges / doc | exchange bytes / doc |", "|---|---|---|---|---|---|"]
    for name in ("FineWeb parity (14x8, no verification)", "default (28x4, signature >= 0.6)"):
        settings = SETTINGS[name]
        verification = settings.verification()
        start = time.perf_counter()
        clusters = cluster_near_duplicates(table, max_bucket_size=settings.max_bucket_size,
                                           verification=verification)
        seconds = time.perf_counter() - start
        distinct = distinct_candidates(table, verification) if verification else 0
        lines.append(f"| {name} | {seconds:.2f} | {seconds / documents * 1e6:.1f} | "
                     f"{clusters.stats.candidates / documents:.3f}; {distinct / documents:.3f}"
                     f" | {clusters.stats.edges / documents:.3f} | "
                     f"{exchanged_bytes(table, verification) / documents:.0f} |")
    # The design not taken: the signature on every band row, verified in the band buckets.
    verification = SETTINGS["default (28x4, signature >= 0.6)"].verification()
    assert verification is not None
    rows = rebanded_rows(table, verification)
    signed = signature_table(table)
    with_signature = rows.append_column(
        "signature", signed["signature"].take(np.tile(np.arange(documents), verification.bands)))
    lines.append(f"| (alternative: signature on every band row) | | | | | "
                 f"{len(scratch_bytes(with_signature)) / documents:.0f} |")
    return "\n".join(lines)


def _write(store: LocalStore, asset: str, parts: list[pa.Table]) -> None:
    layout = PartitionLayout(store, asset, "P")
    layout.write_manifest(Manifest(asset, "P", "v1", [layout.write_part(i, part)
                                                      for i, part in enumerate(parts)]))


def stage_table(documents: int, parts: int = 8) -> str:
    """The `dedup_clusters` stage itself (`ClusterWork`: map tasks, the exchange rounds, the
    components and the ranking, one worker) on a partition of `documents` synthetic
    signatures, per setting: seconds per document, and the share the verification adds."""
    table, _ = synthetic_signatures(documents)
    size = -(-documents // parts)
    docs = pa.table({"doc_id": table["doc_id"], "source": ["web"] * documents,
                     "snapshot": ["CC-MAIN-2024-10"] * documents,
                     "url": [f"https://example.com/{i}" for i in range(documents)],
                     "text": [f"text {i}" for i in range(documents)]})
    lines = ["| setting | stage s | us / doc | exchange buckets |", "|---|---|---|---|"]
    with tempfile.TemporaryDirectory(prefix="near-dup-stage-") as folder:
        store = LocalStore(folder)
        _write(store, DOCUMENTS, [docs.slice(i, size) for i in range(0, documents, size)])
        _write(store, MINHASH_SIGNATURES,
               [table.slice(i, size) for i in range(0, documents, size)])
        for name in ("FineWeb parity (14x8, no verification)",
                     "default (28x4, signature >= 0.6)"):
            start = time.perf_counter()
            output = ClusterWork(DocumentsInput(store, "P"), DEDUP_CLUSTERS, SETTINGS[name])(0)
            seconds = time.perf_counter() - start
            for path in output.tables.values():
                Path(path).unlink()
            lines.append(f"| {name} | {seconds:.2f} | {seconds / documents * 1e6:.1f} | "
                         f"{output.stats.counts['exchange_buckets']} |")
    return "\n".join(lines)


def long_rows(signatures: pa.Table) -> pa.Table:
    """The parity path's exchanged rows (`BAND_ROWS_SCHEMA`) of `signatures`."""
    tables = [pa.table({"band": pa.array([band] * len(signatures), pa.string()),
                        "value": signatures[band], "doc_id": signatures["doc_id"]},
                       schema=BAND_ROWS_SCHEMA)
              for band in signatures.column_names if band.startswith("band_")]
    return pa.concat_tables(tables)


CROSS_READING = """Each labelled pair's first page in one partition, the rest in a second one
added to the index after it; the rates are over the pairs that span the two. Parity links each
new document to the smallest earlier one of each 14x8 band key, unverified; the default keys the
re-banded 28x4 signature, takes each new document's 32 smallest earlier candidates per key and
keeps the pairs whose signatures agree on >= 0.6 of their rows."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", type=int, default=75)
    parser.add_argument("--per-band", type=int, default=2)
    parser.add_argument("--synthetic", type=int, default=200_000)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    labelled = build(DATA, args.families, per_band=args.per_band)
    built = time.perf_counter() - start
    outcomes = {}
    scrubbed = without_boilerplate(labelled, DedupSettings())
    runs = [(name, settings, labelled) for name, settings in SETTINGS.items()]
    runs += [(f"{name}, text without line_dedup's lines", SETTINGS[name], scrubbed)
             for name in ("FineWeb parity (14x8, no verification)",
                          "default (28x4, signature >= 0.6)")]
    for name, settings, pages in runs:
        corpus, stats = merged_corpus(pages, settings)
        verification = settings.verification()
        stats["distinct"] = distinct_candidates(pages.signatures, verification) \
            if verification else 0
        outcomes[name] = Outcome(corpus, merged_pairs(pages, settings), stats)
    summary = summary_table(labelled, outcomes)
    bands = band_table(labelled, outcomes)
    cross = cross_table(labelled)
    cost = cost_table(args.synthetic)
    stage = stage_table(args.synthetic)
    date = subprocess.run(["date", "-u"], capture_output=True, text=True).stdout.strip()
    command = ("`.venv/bin/python benchmarks/near_dup_recall.py --families "
               f"{args.families} --per-band {args.per_band} --synthetic {args.synthetic}`")
    text = "\n\n".join([
        "# Near-duplicate recall and false removal per Jaccard band",
        f"{date}. {command} (labelled set built in {built:.1f} s).",
        "## Summary", summary, READING, "## Merged share per main-text Jaccard band", bands,
        "## Across partitions (`cross_dedup`, `CrossIndex`)", CROSS_READING, cross,
        f"## Cost on {args.synthetic:,} synthetic signatures (one session)", cost,
        f"## The `dedup_clusters` stage on {args.synthetic:,} synthetic signatures"
        " (exchange path, 8 parts, one worker)", stage,
    ])
    print(text)
    RESULTS.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
