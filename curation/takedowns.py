"""Takedowns: a versioned list of URLs and domains, its expansion to documents and their
copies, a tombstone filter for readers, an audit log, and `purge` (docs/architecture.md, "Lineage
and takedowns").

Everything lives in the store under `takedowns/`:

    takedowns/v{n:06d}.json          one immutable version of the list (every entry, in order)
    takedowns/latest.json            a pointer to the newest version (written after it)
    takedowns/tombstones/{id}.parquet the expanded doc_ids of a version (`save_tombstones`)
    takedowns/audit/{when}-{hash}.json one object per event (S3 has no append)
    takedowns/purged/documents/{partition}/{hash}.parquet
                                     what `purge` took out of `documents`, without the text
                                     (doc_id, URL, WARC record...): lineage still answers for
                                     the dataset versions on disk that hold those documents

A version's id is a content hash of what it takes down (each entry's kind and canonical form,
sorted), so two lists that remove the same things have the same id and the dataset version can
include it; the empty list's id is `"none"` (what `corpus_assets/dataset.py` uses until a list
exists). Reasons, requesters and times are recorded in the version file and the audit log, not in
the id. Functions are deterministic given their inputs: the caller passes every timestamp.

Expansion: a URL entry matches a document whose URL equals the entry as given or whose canonical
URL (`curation.urls.canonical_url`, the same rules as `url_dedup`) equals the entry's canonical
form; a domain entry matches the domain and every subdomain. The matched documents' clusters in
`url_dedup`, `exact_dedup`, `dedup_clusters` (within partitions) and `cross_dedup` (across) add
every member, to a fixpoint: the copies at other URLs go too.

Purge rewrites the parts that hold text (`documents`, `scrubbed`, and `decontaminated`'s `hits`
side table, whose `text` is a slice of the document), the `samples/{asset}/*.jsonl` spot-check
files and the funnel reports' sampled documents (`reports/{recipe}/report.json` and its HTML
page, through the report module's rewriter that the caller passes) without the given documents,
keeping every other row, in order. The rewritten part's sha256, size and row count go into the
partition's `_manifest.json` and the task marker that lists it, so the manifest stays truthful;
the cost is that the partition's data version (a hash of its parts' hashes) changes, which makes
Dagster see downstream assets as stale: every recipe's dataset and the catalog must be rebuilt
(`PurgeReport.needs_rebuild`; `corpus takedown purge` does it).

Readers that copy text of a few documents (spot-check samples, report samples) drop the taken-down
ones when they write (`without_taken_down`), so nothing written after a takedown shows them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from curation.columns import ColumnReader, child_keys, dataset_manifests, manifest_keys
from curation.duck import duckdb_session, insert_parts, scalar
from curation.graph import (
    ALL,
    CROSS_DEDUP,
    DOCUMENTS,
    PARTITION_DEDUP,
    PURGE_TARGETS,
    SHARDS,
    TAKEDOWNS,
)
from curation.partition import Manifest, PartFile, PartitionLayout
from curation.storage import Store, parquet_bytes, read_parquet
from curation.urls import canonical_url

PREFIX = TAKEDOWNS
LATEST = f"{PREFIX}/latest.json"
AUDIT = f"{PREFIX}/audit"
TOMBSTONES = f"{PREFIX}/tombstones"
EMPTY_VERSION = "none"
KINDS = ("url", "domain")
SAMPLES = "samples"
REPORTS = "reports"
PURGED = f"{PREFIX}/purged/{DOCUMENTS}"
# What the purged-documents index keeps of a `documents` row: everything but the text.
PURGED_COLUMNS = ("doc_id", "source", "url", "domain", "snapshot", "warc_file", "warc_offset",
                  "fetched_at", "charset", "html_bytes", "licence")


# --- the list ----------------------------------------------------------------------------------


def timestamp(when: datetime | str) -> str:
    """ISO 8601 in UTC with a `Z` (a naive datetime is taken as UTC); strings are parsed and
    normalised the same way."""
    moment = datetime.fromisoformat(when.replace("Z", "+00:00")) if isinstance(when, str) else when
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def canonical_domain(value: str) -> str:
    """Lower-case host without `www.`, trailing dot or port, in IDNA form; a URL gives its host."""
    text = value.strip()
    if "://" in text or text.startswith("//"):
        text = urlsplit(text if "://" in text else "http:" + text).hostname or ""
    host = text.split("/", 1)[0].rsplit("@", 1)[-1]
    if not host.startswith("[") and host.count(":") == 1:
        host = host.split(":", 1)[0]
    host = host.lower().rstrip(".").removeprefix("www.")
    if host and not host.isascii():
        host = host.encode("idna").decode("ascii")
    if not host or " " in host:
        raise ValueError(f"{value!r} names no domain")
    return host


def canonical_form(kind: str, value: str) -> str:
    if kind == "url":
        if not value.strip():
            raise ValueError("an empty URL cannot be taken down")
        return canonical_url(value)
    if kind == "domain":
        return canonical_domain(value)
    raise ValueError(f"takedown kind {kind!r}: use one of {KINDS}")


@dataclass(frozen=True)
class TakedownRequest:
    """What a caller asks to take down; `kind` None guesses (`://` means a URL)."""

    value: str
    reason: str
    kind: str | None = None

    def resolved_kind(self) -> str:
        if self.kind is not None:
            return self.kind
        return "url" if "://" in self.value else "domain"


@dataclass(frozen=True)
class Takedown:
    """One entry of the list."""

    kind: str
    value: str
    canonical: str
    reason: str
    requested_by: str
    requested_at: str

    @property
    def key(self) -> tuple[str, str]:
        return self.kind, self.canonical


@dataclass(frozen=True)
class TakedownList:
    """One immutable version of the list: `number` counts versions (0: no list yet), `version`
    is the content hash of what it takes down."""

    number: int
    version: str
    entries: tuple[Takedown, ...]
    created_at: str | None = None
    created_by: str | None = None
    parent: str | None = None

    @property
    def key(self) -> str:
        return version_key(self.number)

    @property
    def urls(self) -> list[Takedown]:
        return [entry for entry in self.entries if entry.kind == "url"]

    @property
    def domains(self) -> list[Takedown]:
        return [entry for entry in self.entries if entry.kind == "domain"]

    def to_json(self) -> str:
        return json.dumps({"number": self.number, "version": self.version,
                           "created_at": self.created_at, "created_by": self.created_by,
                           "parent": self.parent,
                           "entries": [asdict(entry) for entry in self.entries]},
                          indent=1, sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes) -> TakedownList:
        raw = json.loads(text)
        entries = tuple(Takedown(**entry) for entry in raw["entries"])
        return cls(raw["number"], raw["version"], entries, raw.get("created_at"),
                   raw.get("created_by"), raw.get("parent"))


EMPTY_LIST = TakedownList(0, EMPTY_VERSION, ())


@dataclass(frozen=True)
class TakedownVersion:
    """What `add_takedowns` did: the version now current, the entries it added (none: nothing
    new, no version written), and the audit record's key."""

    takedowns: TakedownList
    added: tuple[Takedown, ...]
    audit_key: str | None

    @property
    def version(self) -> str:
        return self.takedowns.version

    @property
    def number(self) -> int:
        return self.takedowns.number


def version_id(entries: Iterable[Takedown]) -> str:
    keys = sorted({entry.key for entry in entries})
    if not keys:
        return EMPTY_VERSION
    return hashlib.sha256(json.dumps(keys).encode()).hexdigest()[:16]


def version_key(number: int) -> str:
    return f"{PREFIX}/v{number:06d}.json"


def _version_numbers(store: Store) -> list[int]:
    numbers = []
    for key in store.list(PREFIX):
        name = key.removeprefix(PREFIX + "/")
        if "/" not in name and name.startswith("v") and name.endswith(".json"):
            digits = name[1:-5]
            if digits.isdigit():
                numbers.append(int(digits))
    return sorted(numbers)


def read_takedowns(store: Store, number: int) -> TakedownList:
    return TakedownList.from_json(store.read_bytes(version_key(number)))


def current_takedowns(store: Store) -> TakedownList:
    """The newest version (the highest `v{n}` written whole; `latest.json` is a convenience
    pointer written after it), or the empty list."""
    numbers = _version_numbers(store)
    return read_takedowns(store, numbers[-1]) if numbers else EMPTY_LIST


def list_versions(store: Store) -> list[TakedownList]:
    return [read_takedowns(store, number) for number in _version_numbers(store)]


def _entry(request: TakedownRequest | Mapping[str, Any] | str, who: str, when: str) -> Takedown:
    if isinstance(request, str):
        request = TakedownRequest(request, reason="")
    elif isinstance(request, Mapping):
        request = TakedownRequest(request["value"], request.get("reason", ""),
                                  request.get("kind"))
    kind = request.resolved_kind()
    return Takedown(kind, request.value.strip(), canonical_form(kind, request.value),
                    request.reason, who, when)


def add_takedowns(store: Store, entries: Iterable[TakedownRequest | Mapping[str, Any] | str],
                  who: str, when: datetime | str) -> TakedownVersion:
    """Writes a new version holding the current entries plus the new ones (an entry whose kind
    and canonical form are listed already is not added again), then `latest.json`, then an audit
    record. Nothing new: no version is written and the current one is returned."""
    when_text = timestamp(when)
    current = current_takedowns(store)
    known = {entry.key for entry in current.entries}
    added: list[Takedown] = []
    for request in entries:
        entry = _entry(request, who, when_text)
        if entry.key not in known:
            known.add(entry.key)
            added.append(entry)
    if not added:
        return TakedownVersion(current, (), None)
    all_entries = (*current.entries, *added)
    new = TakedownList(current.number + 1, version_id(all_entries), all_entries, when_text, who,
                       current.version if current.number else None)
    if store.exists(new.key):
        raise FileExistsError(f"{new.key} exists: another writer added a version; retry")
    store.write_bytes(new.key, new.to_json().encode())
    store.write_bytes(LATEST, json.dumps({"number": new.number, "version": new.version,
                                          "key": new.key}, sort_keys=True).encode())
    audit = record_audit(store, "add", who, when_text, {
        "takedown_version": new.version, "takedown_number": new.number,
        "entries": [asdict(entry) for entry in added]})
    return TakedownVersion(new, tuple(added), audit)


# --- audit log ---------------------------------------------------------------------------------


def record_audit(store: Store, action: str, who: str, when: datetime | str,
                 details: Mapping[str, Any] | None = None,
                 dataset_versions: Sequence[str] | Mapping[str, Any] = ()) -> str:
    """Writes one audit object (who asked, when, what, which dataset versions changed: the
    caller says) and returns its key. Keys sort by time; the same event gives the same key."""
    when_text = timestamp(when)
    versions = dict(dataset_versions) if isinstance(dataset_versions, Mapping) \
        else list(dataset_versions)
    record = {"action": action, "who": who, "when": when_text, "details": dict(details or {}),
              "dataset_versions": versions}
    body = json.dumps(record, sort_keys=True, ensure_ascii=False, default=str)
    stamp = when_text.replace("-", "").replace(":", "").replace(".", "")
    key = f"{AUDIT}/{stamp}-{action}-{hashlib.sha256(body.encode()).hexdigest()[:12]}.json"
    store.write_bytes(key, (body + "\n").encode())
    return key


def audit_log(store: Store) -> list[dict[str, Any]]:
    """Every audit record, oldest first, each with its `key`."""
    return [json.loads(store.read_bytes(key)) | {"key": key}
            for key in store.list(AUDIT) if key.endswith(".json")]


# --- expansion ---------------------------------------------------------------------------------

_HOST = r"^(?:[A-Za-z][A-Za-z0-9+.\-]*:)?//(?:[^@/?#]*@)?(?P<host>\[[^\]]*\]|[^/:?#]*)"


def hosts_of(urls: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Lower-case hosts without `www.` or a trailing dot (null when there is none), vectorised."""
    host = pc.struct_field(pc.extract_regex(urls, _HOST), [0])
    host = pc.utf8_lower(host)
    host = pc.replace_substring_regex(host, r"\.$", "")
    return pc.replace_substring_regex(host, r"^www\.", "")


def _host_forms(host: str) -> set[str]:
    """A host as stored in a URL may be IDNA or Unicode: both forms."""
    forms = {host}
    try:
        forms.add(host.encode("ascii").decode("idna") if host.isascii()
                  else host.encode("idna").decode("ascii"))
    except UnicodeError:
        pass
    return forms


def _suffix_match(hosts: pa.Array, domains: set[str]) -> pa.Array:
    """True where a host is one of `domains` or a subdomain of one: one `is_in` per label
    count, never a loop over rows."""
    match = pc.fill_null(pc.is_in(hosts, pa.array(sorted(domains), pa.string())), False)
    labels = max((domain.count(".") + 1 for domain in domains), default=0)
    for count in range(1, labels + 1):
        suffix = pc.struct_field(pc.extract_regex(
            hosts, rf"(?P<s>(?:^|\.)(?:[^.]+\.){{{count - 1}}}[^.]+)$"), [0])
        suffix = pc.replace_substring_regex(suffix, r"^\.", "")
        match = pc.or_(match, pc.fill_null(
            pc.is_in(suffix, pa.array(sorted(domains), pa.string())), False))
    return match


def match_documents(table: pa.Table, takedowns: TakedownList) -> pa.Array:
    """A boolean mask over `table` (columns `url`, optionally `domain`): rows the list's entries
    match directly. Only rows whose host a URL entry names are canonicalised in Python."""
    urls = table["url"]
    hosts = hosts_of(urls)
    mask = pa.array([False] * table.num_rows, pa.bool_())
    domains = {form for entry in takedowns.domains for form in _host_forms(entry.canonical)}
    if domains and table.num_rows:
        mask = pc.or_(mask, _suffix_match(hosts, domains))
        if "domain" in table.column_names:
            mask = pc.or_(mask, _suffix_match(pc.utf8_lower(table["domain"]), domains))
    if takedowns.urls and table.num_rows:
        exact = {entry.value for entry in takedowns.urls}
        canonical = {entry.canonical for entry in takedowns.urls}
        url_hosts = set()
        for entry in takedowns.urls:
            host = hosts_of(pa.array([entry.canonical]))[0].as_py()
            if host:
                url_hosts |= _host_forms(host)
        mask = pc.or_(mask, pc.fill_null(pc.is_in(urls, pa.array(sorted(exact | canonical))),
                                         False))
        candidates = pc.fill_null(pc.is_in(hosts, pa.array(sorted(url_hosts), pa.string())),
                                  False)
        # URLs without a parsable host (curated `source://...` keys parse; others are rare).
        candidates = pc.or_(candidates, pc.and_(pc.is_null(hosts), pc.is_valid(urls)))
        rows = pc.indices_nonzero(candidates).to_pylist()
        if rows:
            values = urls.take(pa.array(rows)).to_pylist()
            hits = [row for row, url in zip(rows, values, strict=True)
                    if url is not None and canonical_url(url) in canonical]
            if hits:
                flags = [False] * table.num_rows
                for row in hits:
                    flags[row] = True
                mask = pc.or_(mask, pa.array(flags))
    return mask


def _complete_partitions(store: Store, asset: str) -> list[Manifest]:
    """The asset's complete partitions (those with a `_manifest.json`)."""
    return [Manifest.from_json(store.read_bytes(key).decode())
            for key in manifest_keys(store, asset)]


def _documents_partitions(store: Store, partitions: Iterable[str] | None) -> list[str]:
    found = sorted(m.partition for m in _complete_partitions(store, DOCUMENTS))
    if partitions is None:
        return found
    wanted = list(dict.fromkeys(partitions))
    return [p for p in wanted if PartitionLayout(store, DOCUMENTS, p).is_complete()]


def direct_matches(store: Store, takedowns: TakedownList,
                   partitions: Iterable[str] | None = None) -> set[str]:
    """doc_ids the list's entries match by URL or domain, in the given documents partitions
    (None: every complete one)."""
    matched: set[str] = set()
    if not takedowns.entries:
        return matched
    reader = ColumnReader(store)
    wanted = _documents_partitions(store, partitions)
    for partition in wanted:
        layout = PartitionLayout(store, DOCUMENTS, partition)
        for part in layout.complete_manifest().parts:
            table = reader.read(part.key, ["doc_id", "url", "domain"])
            mask = match_documents(table, takedowns)
            matched.update(table["doc_id"].filter(mask).to_pylist())
    # Purged rows are gone from `documents`: without these a rebuild after a purge would
    # forget what it took down (and the tombstones with it).
    purged = purged_documents(store, wanted)
    if purged.num_rows:
        matched.update(purged["doc_id"].filter(match_documents(purged, takedowns)).to_pylist())
    return matched


def load_cluster_members(con: duckdb.DuckDBPyConnection, store: Store,
                         partitions: Iterable[str], table: str = "members") -> None:
    """Table `table` (`scope`, `part`, `cluster_id`, `doc_id`) in `con`: every cluster row of
    the within-partition cluster tables of `partitions` and of `cross_dedup` (scope:
    `asset/partition`), one stored part at a time."""
    con.execute(f"CREATE TABLE {table} (scope VARCHAR, part INTEGER, cluster_id VARCHAR, "
                "doc_id VARCHAR)")
    layouts = [PartitionLayout(store, asset, partition)
               for partition in partitions for asset in PARTITION_DEDUP]
    layouts.append(PartitionLayout(store, CROSS_DEDUP, ALL))
    for layout in layouts:
        manifest = layout.read_manifest()
        if manifest is not None:
            insert_parts(con, store, table, f"{layout.asset}/{layout.partition}",
                         manifest.parts, 0, ["doc_id", "cluster_id"],
                         "CAST(cluster_id AS VARCHAR), CAST(doc_id AS VARCHAR)")


def cluster_members(store: Store, partitions: Iterable[str]) -> pa.Table:
    """`scope`, `cluster_id`, `doc_id` of every cluster row in the within-partition cluster
    tables of `partitions` and in `cross_dedup` (scope: `asset/partition`), in memory (for
    inspection; the expansion keeps them in DuckDB)."""
    with duckdb_session() as con:
        load_cluster_members(con, store, partitions)
        return con.sql("SELECT scope, cluster_id, doc_id FROM members").to_arrow_table()


def close_over_clusters(con: duckdb.DuckDBPyConnection, seeds: Collection[str],
                        members: str) -> set[str]:
    """`seeds` plus every member of every cluster of table `members` (`scope`, `cluster_id`,
    `doc_id`) holding one of them, to a fixpoint (a copy found through one table can be in a
    cluster of another). Each round joins the new documents' clusters in DuckDB; Python holds
    only the documents found."""
    con.register("_seeds", pa.table({"doc_id": pa.array(sorted(seeds), pa.string())}))
    con.execute("CREATE TABLE _found AS SELECT DISTINCT doc_id FROM _seeds")
    con.unregister("_seeds")
    con.execute("CREATE TABLE _frontier AS SELECT doc_id FROM _found")
    while scalar(con, "SELECT count(*) FROM _frontier"):
        con.execute(f"""
            CREATE OR REPLACE TABLE _frontier AS
            WITH hit AS (SELECT DISTINCT m.scope, m.cluster_id FROM {members} m
                         SEMI JOIN _frontier f ON f.doc_id = m.doc_id)
            SELECT DISTINCT m.doc_id FROM {members} m
            SEMI JOIN hit h ON h.scope = m.scope AND h.cluster_id = m.cluster_id
            ANTI JOIN _found x ON x.doc_id = m.doc_id""")
        con.execute("INSERT INTO _found SELECT doc_id FROM _frontier")
    found = set(con.sql("SELECT doc_id FROM _found").to_arrow_table()["doc_id"].to_pylist())
    con.execute("DROP TABLE _found")
    con.execute("DROP TABLE _frontier")
    return found


def expand_takedowns(store: Store, takedown_list: TakedownList,
                     partitions: Iterable[str] | None = None) -> set[str]:
    """The documents the list matches in `partitions` (None: every complete documents
    partition) plus their exact and near-duplicate copies at other URLs, through the cluster
    tables within those partitions and across them. Memory: the cluster tables are read part
    by part into a DuckDB session under the current budget; Python holds the documents
    taken down."""
    wanted = _documents_partitions(store, partitions)
    seeds = direct_matches(store, takedown_list, wanted)
    if not seeds:
        return seeds
    with duckdb_session() as con:
        load_cluster_members(con, store, wanted)
        return close_over_clusters(con, seeds, "members")


# --- tombstones --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tombstones:
    """The expanded doc_ids of a takedown version, for readers to drop at once."""

    version: str
    doc_ids: frozenset[str]

    def is_taken_down(self, doc_id: str) -> bool:
        return doc_id in self.doc_ids

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self.doc_ids

    def __len__(self) -> int:
        return len(self.doc_ids)

    def mask(self, doc_ids: pa.Array | pa.ChunkedArray) -> pa.Array:
        """True where a row's doc_id is taken down."""
        return pc.fill_null(pc.is_in(doc_ids, pa.array(sorted(self.doc_ids), pa.string())),
                            False)

    def filter(self, table: pa.Table, column: str = "doc_id") -> pa.Table:
        """`table` without taken-down rows, other rows in order."""
        if not self.doc_ids:
            return table
        return table.filter(pc.invert(self.mask(table[column])))


def tombstones_key(version: str) -> str:
    return f"{TOMBSTONES}/{version}.parquet"


def save_tombstones(store: Store, takedown_list: TakedownList, doc_ids: Iterable[str]) -> str:
    """Stores the expanded set of a version (sorted doc_ids) so readers need not expand. Each
    recipe's mix expands the list over its own partitions, so the stored set is the union of
    every expansion of the same version (one recipe must not erase another's)."""
    key = tombstones_key(takedown_list.version)
    ids = set(doc_ids)
    if store.exists(key):
        ids |= set(read_parquet(store, key)["doc_id"].to_pylist())
    ids = sorted(ids)
    store.write_bytes(key, parquet_bytes(pa.table({"doc_id": pa.array(ids, pa.string())})))
    return key


def load_tombstones(store: Store, version: str | None = None) -> Tombstones:
    """The stored expanded set of `version` (None: the current list's); empty when none."""
    version = version or current_takedowns(store).version
    key = tombstones_key(version)
    if version == EMPTY_VERSION or not store.exists(key):
        return Tombstones(version, frozenset())
    return Tombstones(version, frozenset(read_parquet(store, key)["doc_id"].to_pylist()))


def tombstone_filter(doc_ids: Iterable[str], version: str = "") -> Tombstones:
    return Tombstones(version, frozenset(doc_ids))


def is_taken_down(doc_id: str, tombstones: Tombstones) -> bool:
    return tombstones.is_taken_down(doc_id)


def without_taken_down(store: Store, table: pa.Table, partition: str | None = None) -> pa.Table:
    """`table` (with `doc_id`) without the documents the current list takes down: its stored
    expansion, plus what the list matches directly by URL (the `url` column, else the
    `documents` rows of `partition`), so a partition processed after the last rebuild is
    covered too. For writers of text copies (samples, reports); other rows stay in order."""
    takedown_list = current_takedowns(store)
    if not takedown_list.entries or not table.num_rows:
        return table
    hidden = load_tombstones(store, takedown_list.version).mask(table["doc_id"])
    if "url" in table.column_names:
        hidden = pc.or_(hidden, match_documents(table, takedown_list))
    elif partition is not None:
        matched = direct_matches(store, takedown_list, [partition])
        hidden = pc.or_(hidden, Tombstones("", frozenset(matched)).mask(table["doc_id"]))
    return table.filter(pc.invert(hidden))


# --- purge -------------------------------------------------------------------------------------


@dataclass
class PurgeReport:
    """What `purge` changed. `rows_removed` maps each rewritten object (part or sample file) to
    the rows taken out; `data_versions` maps `asset/partition` to (before, after)."""

    rows_removed: dict[str, int] = field(default_factory=dict)
    manifests_updated: list[str] = field(default_factory=list)
    markers_updated: list[str] = field(default_factory=list)
    data_versions: dict[str, tuple[str, str]] = field(default_factory=dict)
    deleted_versions: list[str] = field(default_factory=list)
    deleted_objects: int = 0
    kept_versions: list[str] = field(default_factory=list)
    audit_key: str | None = None

    @property
    def total_rows_removed(self) -> int:
        return sum(self.rows_removed.values())

    @property
    def needs_rebuild(self) -> bool:
        """A purged partition's data version changed: every mix reading it is stale until the
        recipes' datasets (and the catalog) are rebuilt."""
        return any(before != after for before, after in self.data_versions.values())

    @property
    def files_rewritten(self) -> list[str]:
        return sorted(self.rows_removed)


def _targets(assets: Sequence[str]) -> list[tuple[str, str]]:
    out = []
    for target in assets:
        asset, _, table = target.partition(":")
        out.append((asset, table or "part"))
    return out


def _table_keys(store: Store, asset: str, table: str) -> list[str]:
    """Every `{asset}/{partition}/{table}-NNNNN.parquet`, complete partition or not (a killed
    run's parts hold text too)."""
    return child_keys(store, asset, f"{table}-*.parquet")


def _rewrite_part(store: Store, key: str, ids: pa.Array) -> tuple[PartFile, pa.Table] | None:
    """The part without the rows of `ids` (written with the same Parquet settings as every
    part) and the rows taken out, or None when it holds none of them."""
    table = read_parquet(store, key)
    if "doc_id" not in table.column_names:
        return None
    drop = pc.fill_null(pc.is_in(table["doc_id"], ids), False)
    if not (pc.sum(drop).as_py() or 0):
        return None
    kept = table.filter(pc.invert(drop))
    data = parquet_bytes(kept)
    store.write_bytes(key, data)
    part = PartFile(key, kept.num_rows, len(data), hashlib.sha256(data).hexdigest())
    return part, table.filter(drop)


def _purged_key(folder: str, rows: pa.Table) -> str:
    digest = hashlib.sha256("\n".join(sorted(rows["doc_id"].to_pylist())).encode()).hexdigest()
    return f"{PURGED}/{folder}/{digest[:16]}.parquet"


def _record_purged(store: Store, prefix: str, partition: str, removed: list[pa.Table]) -> None:
    """Keeps what lineage needs of the purged `documents` rows (never the text)."""
    rows = pa.concat_tables([table.select([c for c in PURGED_COLUMNS if c in table.column_names])
                             for table in removed], promote_options="permissive")
    rows = rows.append_column("partition", pa.array([partition] * rows.num_rows, pa.string()))
    store.write_bytes(_purged_key(prefix.split("/", 1)[1], rows), parquet_bytes(rows))


def purged_documents(store: Store, partitions: Iterable[str] | None = None) -> pa.Table:
    """The rows `purge` took out of `documents` (PURGED_COLUMNS and `partition`, no text), of
    `partitions` (None: all); a document purged twice is listed once."""
    wanted = None if partitions is None else set(partitions)
    tables = []
    for key in store.list(PURGED):
        if key.endswith(".parquet"):
            table = read_parquet(store, key)
            if wanted is None or (table.num_rows and table["partition"][0].as_py() in wanted):
                tables.append(table)
    if not tables:
        return pa.table({name: pa.array([], pa.string()) for name in ("doc_id", "url",
                                                                      "partition")})
    table = pa.concat_tables(tables, promote_options="permissive")
    first: dict[str, int] = {}
    for row, doc_id in enumerate(table["doc_id"].to_pylist()):
        first.setdefault(doc_id, row)
    return table.take(sorted(first.values())) if len(first) < table.num_rows else table


def _update_markers(store: Store, prefix: str, changed: Mapping[str, PartFile],
                    ids: set[str]) -> list[str]:
    """Task markers list the parts their task wrote (a re-run under the same version rebuilds
    the manifest from them): point them at the rewritten parts."""
    updated = []
    for key in store.list(f"{prefix}/_tasks"):
        if not key.endswith(".json"):
            continue
        marker = json.loads(store.read_bytes(key))
        parts = marker.get("parts", {})
        touched = False
        for name, part in parts.items():
            if part.get("key") in changed:
                parts[name] = asdict(changed[part["key"]])
                touched = True
        samples = marker.get("sample_ids")
        if touched and samples:
            marker["sample_ids"] = [doc_id for doc_id in samples if doc_id not in ids]
        if touched:
            store.write_bytes(key, json.dumps(marker, sort_keys=True).encode())
            updated.append(key)
    return updated


def _purge_samples(store: Store, ids: set[str], report: PurgeReport) -> None:
    for key in store.list(SAMPLES):
        if not key.endswith(".jsonl"):
            continue
        raw = store.read_bytes(key)
        lines = raw.splitlines(keepends=True)
        kept, removed = [], 0
        for line in lines:
            text = line.strip()
            doc_id = None
            if text:
                try:
                    doc_id = json.loads(text).get("doc_id")
                except (json.JSONDecodeError, AttributeError):
                    doc_id = None
            if doc_id in ids:
                removed += 1
            else:
                kept.append(line)
        if removed:
            body = b"".join(kept)
            store.write_bytes(key, body if body.strip() else b"\n")
            report.rows_removed[key] = removed


ReportRewriter = Callable[[Store, str, set[str]], int]
"""Takes documents out of one stored funnel report (`curation.report.rewrite_stored_report`):
`(store, report.json key, doc_ids) -> samples removed`."""


def _purge_reports(store: Store, ids: set[str], report: PurgeReport,
                   rewrite_report: ReportRewriter) -> None:
    """Every stored funnel report (`reports/{recipe}/report.json` and its HTML page) without
    the sampled documents of `ids`."""
    for key in store.list(REPORTS):
        if key.endswith("/report.json"):
            removed = rewrite_report(store, key, ids)
            if removed:
                report.rows_removed[key] = removed


def versions_holding(store: Store, doc_ids: Collection[str]) -> list[str]:
    """Dataset versions (`shards/{version}/` with a manifest) whose spans hold any of doc_ids."""
    ids = pa.array(sorted(set(doc_ids)), pa.string())
    found = []
    reader = ColumnReader(store)
    for version, manifest in dataset_manifests(store):
        key = f"{SHARDS}/{version}/{manifest['spans']['name']}"
        if not store.exists(key):
            continue
        spans = reader.read(key, ["doc_id"])
        if pc.any(pc.is_in(spans["doc_id"], ids)).as_py():
            found.append(version)
    return found


def purge(store: Store, doc_ids: Iterable[str], assets: Sequence[str] = PURGE_TARGETS, *,
          samples: bool = True, delete_old_versions: bool = False,
          keep_versions: Collection[str] = (), who: str | None = None,
          when: datetime | str | None = None,
          dataset_versions: Sequence[str] | Mapping[str, Any] = (),
          rewrite_report: ReportRewriter | None = None) -> PurgeReport:
    """Rewrites every part of `assets` (`asset` for its main part, `asset:table` for a side
    table) and, with `samples`, every `samples/*/*.jsonl` and (given `rewrite_report`, the
    report module's own rewriter: that module reads this one, so the caller passes it) every
    funnel report's sampled documents, without the rows of `doc_ids`; other rows stay
    identical and in order. The
    `documents` rows taken out are kept without their text under `takedowns/purged/` (for
    lineage). Manifests and task markers get the new parts' sha256, size and rows (so each
    purged partition's data version changes; the report lists before and after). With
    `delete_old_versions`, every `shards/{version}/` whose spans hold one of the documents is
    deleted, except `keep_versions`. With `who` and `when`, an audit record is written."""
    ids_set = set(doc_ids)
    report = PurgeReport()
    ids = pa.array(sorted(ids_set), pa.string())
    if ids_set:
        for asset, table in _targets(assets):
            changed_by_prefix: dict[str, dict[str, PartFile]] = {}
            removed_by_prefix: dict[str, list[pa.Table]] = {}
            for key in _table_keys(store, asset, table):
                rewritten = _rewrite_part(store, key, ids)
                if rewritten is None:
                    continue
                part, removed = rewritten
                report.rows_removed[key] = removed.num_rows
                prefix = key.rsplit("/", 1)[0]
                changed_by_prefix.setdefault(prefix, {})[key] = part
                removed_by_prefix.setdefault(prefix, []).append(removed)
            for prefix, changed in changed_by_prefix.items():
                partition = _finish_partition(store, asset, prefix, changed, ids_set, report)
                if (asset, table) == (DOCUMENTS, "part"):
                    _record_purged(store, prefix, partition, removed_by_prefix[prefix])
        if samples:
            _purge_samples(store, ids_set, report)
            if rewrite_report is not None:
                _purge_reports(store, ids_set, report, rewrite_report)
    if delete_old_versions and ids_set:
        keep = set(keep_versions)
        for version in versions_holding(store, ids_set):
            if version in keep:
                report.kept_versions.append(version)
                continue
            # The manifest first, so a reader never sees a complete version with files missing.
            store.delete(f"{SHARDS}/{version}/manifest.json")
            report.deleted_objects += store.delete_prefix(f"{SHARDS}/{version}") + 1
            report.deleted_versions.append(version)
    if who is not None and when is not None:
        report.audit_key = record_audit(store, "purge", who, when, {
            "documents": len(ids_set), "rows_removed": report.total_rows_removed,
            "files": report.files_rewritten, "deleted_versions": report.deleted_versions,
            "data_versions": {k: list(v) for k, v in report.data_versions.items()}},
            dataset_versions)
    return report


def _finish_partition(store: Store, asset: str, prefix: str, changed: dict[str, PartFile],
                      ids: set[str], report: PurgeReport) -> str:
    """Points the manifest and task markers at the rewritten parts; returns the partition."""
    partition = prefix.split("/", 1)[1]
    manifest_key = f"{prefix}/_manifest.json"
    if store.exists(manifest_key):
        manifest = Manifest.from_json(store.read_bytes(manifest_key).decode())
        before = manifest.data_version
        removed = {key: report.rows_removed[key] for key in changed}
        manifest.parts = [changed.get(p.key, p) for p in manifest.parts]
        manifest.tables = {name: [changed.get(p.key, p) for p in parts]
                           for name, parts in manifest.tables.items()}
        history = list(manifest.extra.get("purged", []))
        history.append({"rows_removed": removed, "data_version_before": before})
        manifest.extra = {**manifest.extra, "purged": history}
        store.write_bytes(manifest_key, manifest.to_json().encode())
        report.manifests_updated.append(manifest_key)
        report.data_versions[f"{asset}/{manifest.partition}"] = (before, manifest.data_version)
        partition = manifest.partition
    report.markers_updated += _update_markers(store, prefix, changed, ids)
    return partition


__all__ = [
    "EMPTY_LIST", "EMPTY_VERSION", "PURGE_TARGETS", "PurgeReport", "ReportRewriter", "Takedown",
    "TakedownList", "TakedownRequest", "TakedownVersion", "Tombstones", "add_takedowns",
    "audit_log",
    "canonical_domain", "canonical_form", "close_over_clusters", "cluster_members",
    "current_takedowns", "direct_matches", "expand_takedowns", "hosts_of", "is_taken_down",
    "list_versions", "load_tombstones", "match_documents", "purge", "read_takedowns",
    "purged_documents", "record_audit", "save_tombstones", "timestamp", "tombstone_filter",
    "versions_holding", "without_taken_down",
]
