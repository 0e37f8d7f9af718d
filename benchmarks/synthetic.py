"""A synthetic partition set with a known duplicate structure, for `benchmarks/scale.py` and
its tests (no Dagster).

Documents are numbered 0..N-1 in *family order*: family `f` holds the consecutive documents
`[start_f, start_f + size_f)`. Family sizes follow a power law (a Zipf draw, capped), so most
documents are alone and a few families hold thousands of copies. Document `j` goes to the
partition a hash of `j` names, so every large family has copies in several partitions.

Per document (FineWeb's shape):

- `band_00`..`band_13` (uint64): a family member shares a random subset of its family's bands
  and always the family's *anchor* band (`f % BANDS`), so LSH joins exactly the family; the
  other bands are its own. A fraction of all documents (`hot_fraction`) also carries one of
  `HOT_VALUES` shared values in the last band: hot buckets of thousands of unrelated documents
  (the band every near-empty page shares), which the clustering caps.
- `text_hash`: the family's for its exact copies (half of a family's members), else the
  document's own; `url_hash`: the family's for a third of its members (the same URL in several
  crawls), else its own.
- lines (`curation.dedup.LINE_HASH_SCHEMA`): a Poisson number of lines, each either a
  boilerplate line drawn from a Zipf over `BOILERPLATE` lines or a line of its own; exact
  copies share their lines.
- for the shards (`text=True`): words drawn from a Zipf vocabulary, a log-normal number of
  them (median ~400 tokens, a long tail), generated from the document number alone.

Everything is a vectorised function of (seed, document number), written in chunks of
`CHUNK` documents through one Parquet writer per partition: the generator holds one chunk and
the family table (one int64 per family), whatever N.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

BANDS = 14
HOT_VALUES = 4
BOILERPLATE = 100_000
CHUNK = 1 << 19
MAX_FAMILY = 5_000
MASK = np.uint64(0xFFFFFFFFFFFFFFFF)

SIGNATURES = "signatures"
LINES = "lines"
CANDIDATES = "candidates"
BAND_COLUMNS = [f"band_{b:02d}" for b in range(BANDS)]


def mix64(values: np.ndarray, salt: int) -> np.ndarray:
    """splitmix64's finaliser of `values + salt`: a fixed, well-spread uint64 hash."""
    with np.errstate(over="ignore"):
        z = (values.astype(np.uint64) + np.uint64(salt) * np.uint64(0x9E3779B97F4A7C15)) & MASK
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _unit(values: np.ndarray, salt: int) -> np.ndarray:
    """A uniform [0, 1) draw per value."""
    return (mix64(values, salt) >> np.uint64(11)).astype(np.float64) / float(1 << 53)


@dataclass(frozen=True)
class Spec:
    """What to generate. `duplicate_share`: documents in families of two or more (about);
    `zipf`: the family-size exponent; `lines_per_document`: the Poisson mean; `text`: also
    write the text table the shards read; `lines`: write the line hashes (the largest table:
    leave it out when line dedup is not measured)."""

    documents: int
    partitions: int = 8
    seed: int = 0
    duplicate_share: float = 0.3
    zipf: float = 1.8
    hot_fraction: float = 0.01
    lines_per_document: float = 6.0
    boilerplate_share: float = 0.3
    text: bool = False
    lines: bool = True
    max_family: int = MAX_FAMILY

    def partition_names(self) -> list[str]:
        return [f"SYN-{p:03d}" for p in range(self.partitions)]


@dataclass
class Families:
    """Family `f` holds documents `starts[f] .. starts[f + 1] - 1`."""

    starts: np.ndarray = field(repr=False)

    @classmethod
    def draw(cls, spec: Spec) -> Families:
        rng = np.random.default_rng(spec.seed)
        sizes: list[np.ndarray] = []
        duplicated, target = 0, int(spec.documents * spec.duplicate_share)
        while duplicated < target:
            draw = np.minimum(rng.zipf(spec.zipf, 1 << 16) + 1, spec.max_family)  # 2, 3, ...
            draw = draw[np.cumsum(draw) <= target - duplicated]
            if not draw.size:
                break
            sizes.append(draw)
            duplicated += int(draw.sum())
        families = np.concatenate(sizes) if sizes else np.zeros(0, np.int64)
        singles = spec.documents - int(families.sum())
        # Families and single documents interleaved at random, so every chunk has both.
        all_sizes = np.concatenate([families, np.ones(singles, np.int64)])
        rng.shuffle(all_sizes)
        return cls(np.concatenate([[0], np.cumsum(all_sizes)]).astype(np.int64))

    def of(self, documents: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.starts, documents, side="right") - 1

    def size(self, family: np.ndarray) -> np.ndarray:
        return self.starts[family + 1] - self.starts[family]

    @property
    def count(self) -> int:
        return len(self.starts) - 1


def doc_ids(documents: np.ndarray) -> pa.Array:
    return pa.array(np.char.add("d", np.char.zfill(documents.astype(str), 12)))


def partition_of(documents: np.ndarray, spec: Spec) -> np.ndarray:
    return (mix64(documents, spec.seed * 7 + 1) % np.uint64(spec.partitions)).astype(np.int64)


def exact_copies(documents: np.ndarray, grouped: np.ndarray, spec: Spec) -> np.ndarray:
    """Which of `documents` are exact copies of their family's text: half of the members of
    a family of two or more (`grouped`: whether each one's family is)."""
    return grouped & (_unit(documents, spec.seed + 11) < 0.5)


def signatures(documents: np.ndarray, families: Families, spec: Spec) -> pa.Table:
    """doc_id, url_hash, text_hash and the bands of `documents`."""
    family = families.of(documents).astype(np.uint64)
    family_salt = family * np.uint64(BANDS + 2)
    own_salt = documents.astype(np.uint64) * np.uint64(BANDS + 2) + np.uint64(1 << 62)
    grouped = families.size(family.astype(np.int64)) > 1
    anchor = family % np.uint64(BANDS)
    columns: dict[str, pa.Array] = {"doc_id": doc_ids(documents)}
    exact = exact_copies(documents, grouped, spec)
    same_url = grouped & (_unit(documents, spec.seed + 12) < 1 / 3)
    columns["url_hash"] = pa.array(np.where(same_url, mix64(family_salt, spec.seed + 13),
                                            mix64(own_salt, spec.seed + 13)))
    columns["text_hash"] = pa.array(np.where(exact, mix64(family_salt, spec.seed + 14),
                                             mix64(own_salt, spec.seed + 14)))
    hot = _unit(documents, spec.seed + 15) < spec.hot_fraction
    hot_value = mix64(documents % np.uint64(HOT_VALUES), spec.seed + 16)
    for band in range(BANDS):
        shared = grouped & ((anchor == band) | exact
                            | (_unit(documents, spec.seed + 100 + band) < 0.5))
        values = np.where(shared, mix64(family_salt + np.uint64(band), spec.seed + 17),
                          mix64(own_salt + np.uint64(band), spec.seed + 17))
        if band == BANDS - 1:
            values = np.where(hot & (anchor != band), hot_value, values)
        columns[BAND_COLUMNS[band]] = pa.array(values)
    return pa.table(columns)


def line_rows(documents: np.ndarray, families: Families, spec: Spec) -> pa.Table:
    """`LINE_HASH_SCHEMA` rows of `documents`; an exact copy's lines are its family's."""
    rng = np.random.default_rng([spec.seed, int(documents[0]), 3])
    counts = rng.poisson(spec.lines_per_document, documents.size) + 1
    owner = np.repeat(documents, counts)
    line = np.arange(owner.size) - np.repeat(np.cumsum(counts) - counts, counts)
    family = families.of(owner).astype(np.uint64)
    exact = exact_copies(owner, families.size(family.astype(np.int64)) > 1, spec)
    source = np.where(exact, family, owner.astype(np.uint64) + np.uint64(1 << 62))
    key = source * np.uint64(1024) + line.astype(np.uint64)
    boiler = _unit(key, spec.seed + 21) < spec.boilerplate_share
    common = (np.random.default_rng([spec.seed, int(documents[0]), 4]).zipf(1.3, owner.size)
              % BOILERPLATE).astype(np.uint64)
    line_hash = np.where(boiler, mix64(common, spec.seed + 22), mix64(key, spec.seed + 23))
    chars = np.where(boiler, 10 + (common % np.uint64(80)), 3 + (key % np.uint64(200)))
    return pa.table({"doc_id": doc_ids(owner), "line": pa.array(line.astype(np.int32)),
                     "line_hash": pa.array(line_hash),
                     "chars": pa.array(chars.astype(np.int32))})


def candidate_rows(documents: np.ndarray, spec: Spec) -> pa.Table:
    """The mix's per-document annotations (`curation.mix.CANDIDATE_SCHEMA` without the
    group): languages, verdicts, a quality score, the text's bytes."""
    partition = partition_of(documents, spec)
    names = np.array(spec.partition_names())
    n = documents.size
    language = np.where(_unit(documents, spec.seed + 31) < 0.85, "en", "de")
    words = text_words(documents, spec)
    return pa.table({
        "doc_id": doc_ids(documents), "partition": pa.array(names[partition]),
        "source": pa.array(["web"] * n), "snapshot": pa.array(names[partition]),
        "licence": pa.nulls(n, pa.string()), "url": pa.nulls(n, pa.string()),
        "language": pa.array(language),
        "language_keep": pa.array(_unit(documents, spec.seed + 32) < 0.95),
        "heuristics_keep": pa.array(_unit(documents, spec.seed + 33) < 0.8),
        "quality_score": pa.array(_unit(documents, spec.seed + 34)),
        "contaminated": pa.array(_unit(documents, spec.seed + 35) < 0.001),
        "empty_after_edits": pa.array(_unit(documents, spec.seed + 36) < 0.01),
        "verdict_drop": pa.nulls(n, pa.string()),
        "text_bytes": pa.array((words * 6).astype(np.int64)),
    })


VOCABULARY = 20_000
POOL_WORDS = 4_000_000


def text_words(documents: np.ndarray, spec: Spec) -> np.ndarray:
    """Words per document: log-normal (median ~330 words, ~400 tokens; a tail of books)."""
    normal = np.sqrt(-2 * np.log(1 - _unit(documents, spec.seed + 41))) * np.cos(
        2 * np.pi * _unit(documents, spec.seed + 42))
    return np.clip(np.exp(5.8 + 1.0 * normal), 5, 50_000).astype(np.int64)


def _pool(seed: int) -> tuple[str, np.ndarray]:
    """A text of `POOL_WORDS` Zipf-distributed pseudo-words (lines of 12), and where each word
    starts: documents are slices of it, so text costs one slice per document."""
    rng = np.random.default_rng([seed, 5])
    letters = np.array(list("etaoinshrdlucmfwypvbgkjqxz"))
    lengths = np.clip(rng.poisson(4, VOCABULARY) + 1, 1, 14)
    picks = rng.choice(letters, (VOCABULARY, 14))
    vocabulary = np.array(["".join(row[:n]) for row, n in zip(picks, lengths, strict=True)])
    words = vocabulary[(rng.zipf(1.2, POOL_WORDS) - 1) % VOCABULARY]
    separators = np.where(np.arange(1, POOL_WORDS + 1) % 12 == 0, "\n", " ")
    text = "".join(np.char.add(words, separators).tolist())
    starts = np.concatenate([[0], np.cumsum(np.char.str_len(words) + 1)[:-1]])
    return text, starts


_POOLS: dict[int, tuple[str, np.ndarray]] = {}


def _cached_pool(seed: int) -> tuple[str, np.ndarray]:
    if seed not in _POOLS:
        _POOLS[seed] = _pool(seed)
    return _POOLS[seed]


def pool_words(seed: int) -> list[str]:
    """Every distinct word `texts` can give for `seed`, sorted (a word-level tokenizer's
    vocabulary)."""
    return sorted(set(_cached_pool(seed)[0].split()))


def texts(documents: np.ndarray, spec: Spec) -> list[str]:
    """Each document's text, a function of its number alone: `text_words` consecutive words
    of the pool from a hashed start."""
    text, starts = _cached_pool(spec.seed)
    words = np.minimum(text_words(documents, spec), POOL_WORDS // 2)
    first = (mix64(documents, spec.seed + 43) % np.uint64(POOL_WORDS // 2)).astype(np.int64)
    begin, end = starts[first], starts[first + words] - 1
    return [text[b:e] for b, e in zip(begin.tolist(), end.tolist(), strict=True)]


def chunks(spec: Spec) -> Iterator[np.ndarray]:
    for start in range(0, spec.documents, CHUNK):
        yield np.arange(start, min(start + CHUNK, spec.documents), dtype=np.int64)


@dataclass(frozen=True)
class Generated:
    """Where the tables are: `folder/{table}/{partition}.parquet`."""

    folder: Path
    spec: Spec

    def files(self, table: str, partitions: list[str] | None = None) -> list[Path]:
        names = partitions or self.spec.partition_names()
        return [p for p in (self.folder / table / f"{n}.parquet" for n in names) if p.exists()]


def generate(folder: str | Path, spec: Spec) -> Generated:
    """Write the tables of `spec` under `folder` (see the module docstring)."""
    folder = Path(folder)
    families = Families.draw(spec)
    names = spec.partition_names()
    tables = [SIGNATURES, CANDIDATES] + ([LINES] if spec.lines else []) \
        + (["text"] if spec.text else [])
    writers: dict[tuple[str, int], pq.ParquetWriter] = {}
    try:
        for documents in chunks(spec):
            partition = partition_of(documents, spec)
            for p in range(spec.partitions):
                mine = documents[partition == p]
                if not mine.size:
                    continue
                rows = {SIGNATURES: lambda d: signatures(d, families, spec),
                        LINES: lambda d: line_rows(d, families, spec),
                        CANDIDATES: lambda d: candidate_rows(d, spec),
                        "text": lambda d: pa.table({"doc_id": doc_ids(d),
                                                    "text": pa.array(texts(d, spec))})}
                for table in tables:
                    data = rows[table](mine)
                    if (table, p) not in writers:
                        path = folder / table / f"{names[p]}.parquet"
                        path.parent.mkdir(parents=True, exist_ok=True)
                        writers[table, p] = pq.ParquetWriter(path, data.schema,
                                                             compression="zstd")
                    # A line table's row group holds whole documents: the line_counts step
                    # reads one row group per map task.
                    writers[table, p].write_table(data, row_group_size=(
                        max(data.num_rows, 1) if table == LINES else 1 << 17))
    finally:
        for writer in writers.values():
            writer.close()
    return Generated(folder, spec)


def expected_families(spec: Spec) -> dict[str, str]:
    """doc_id -> its family's smallest doc_id, for every document in a family of two or more:
    the near-duplicate clusters when no hot bucket is capped (`hot_fraction=0`)."""
    families = Families.draw(spec)
    sizes = np.diff(families.starts)
    starts = families.starts[:-1][sizes > 1]
    members = np.concatenate([np.arange(s, s + n) for s, n in zip(starts, sizes[sizes > 1],
                                                                   strict=True)]) \
        if starts.size else np.zeros(0, np.int64)
    roots = np.repeat(starts, sizes[sizes > 1])
    return dict(zip(doc_ids(members).to_pylist(), doc_ids(roots).to_pylist(), strict=True))


NEAR_CLUSTERS, EXACT_CLUSTERS = "near_dup.parquet", "exact_text.parquet"


def write_planted_clusters(folder: Path, spec: Spec) -> dict[str, int]:
    """The clusters `exact_keys` and `near_dup` find in the data of `spec`, as planted: each
    family of two or more a near-duplicate cluster named by its first doc_id, its exact copies
    (two or more) an exact cluster inside it named by its smallest one, as the steps name
    them. Written, sorted by doc_id like the steps' own, to `NEAR_CLUSTERS` and
    `EXACT_CLUSTERS` (doc_id, cluster_id) under `folder` a chunk at a time; returns the members
    of each. Hot buckets aside (`hot_fraction`), they
    are the clusters the steps find (`tests/test_scale.py`)."""
    from curation.duck import duckdb_session, literal

    families = Families.draw(spec)
    folder.mkdir(parents=True, exist_ok=True)
    schema = pa.schema([("doc_id", pa.string()), ("cluster_id", pa.string())])
    with pq.ParquetWriter(folder / NEAR_CLUSTERS, schema) as near, \
            pq.ParquetWriter(folder / f"{EXACT_CLUSTERS}.all", schema) as exact:
        for chunk in chunks(spec):
            family = families.of(chunk)
            ids, names = doc_ids(chunk), doc_ids(families.starts[family])
            grouped = families.size(family) > 1
            for writer, rows in ((near, grouped), (exact, exact_copies(chunk, grouped, spec))):
                mask = pa.array(rows)
                writer.write_table(pa.table({"doc_id": ids.filter(mask),
                                             "cluster_id": names.filter(mask)}, schema=schema))
    every = folder / f"{EXACT_CLUSTERS}.all"
    # A family with one exact copy has no exact cluster (its copies may span chunks), and
    # exact_keys names a cluster by its smallest member.
    with duckdb_session() as con:
        con.execute(f"COPY (SELECT doc_id, min(doc_id) OVER w AS cluster_id"
                    f" FROM read_parquet({literal(str(every))}) WINDOW w AS (PARTITION BY"
                    f" cluster_id) QUALIFY count(*) OVER w > 1 ORDER BY doc_id)"
                    f" TO {literal(str(folder / EXACT_CLUSTERS))} (FORMAT parquet)")
    every.unlink()
    return {name: pq.ParquetFile(folder / name).metadata.num_rows
            for name in (NEAR_CLUSTERS, EXACT_CLUSTERS)}
