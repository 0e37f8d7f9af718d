"""The tokenizer a dataset version is built with: a pinned `tokenizer.json` or a trained BPE.

A `PinnedTokenizer` carries what the shard writer and the training cluster must agree on: the
content sha256 of the exact `tokenizer.json` bytes, the EOS id appended after every document
occurrence, the pad id that fills padding positions, the vocabulary size and the token dtype of
the shards (`uint16` below 65,500 ids, else `int32`: the Megatron-Core indexed-dataset rule; it
has no `uint32`).

Corpus text is encoded with `encode_special_tokens` on: a document that contains the literal text
`<|endoftext|>` gets ordinary tokens for it, never the EOS id, so EOS marks document ends only
(the shard verifier counts on it). Non-special added tokens (for example OLMo's PII placeholders
`|||EMAIL_ADDRESS|||`) still match as single tokens.

Training (`train_bpe`) is a byte-level BPE with `<|endoftext|>` as id 0. The `tokenizers` BPE
trainer is deterministic for it: the alphabet is sorted before ids are given, merges are chosen
by count with ties broken by pair ids, and the parallel word counting only sums. (Its known
non-determinism, tokenizers issue #1794, comes from continuing-subword prefixes, which a
byte-level BPE does not use.) The same texts therefore give byte-identical `tokenizer.json`
whatever the thread count; `tests/test_shards.py` checks it across processes.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

EOS_TOKEN = "<|endoftext|>"
# Tried in order when no EOS token is named: GPT-2/NeoX/OLMo, Llama 3, SentencePiece styles.
EOS_CANDIDATES = (EOS_TOKEN, "<|end_of_text|>", "</s>", "<eos>", "<|eos|>")
PAD_CANDIDATES = ("<|pad|>", "<|padding|>", "<pad>", "[PAD]", "<|finetune_right_pad_id|>")
# Megatron-Core `DType.optimal_dtype`: uint16 when the cardinality is below 65,500.
UINT16_LIMIT = 65_500


class TokenizerError(ValueError):
    """A tokenizer cannot be used for shards (no EOS token, unreadable file)."""


@dataclass(frozen=True)
class PinnedTokenizer:
    """A tokenizer with the content hash and special ids that shards depend on."""

    tokenizer: Tokenizer
    json_bytes: bytes
    sha256: str
    eos_id: int
    pad_id: int
    vocab_size: int

    @property
    def dtype(self) -> np.dtype:
        return token_dtype(self.vocab_size)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text, no special tokens added (EOS is the packer's job)."""
        encodings = self.tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
        return [encoding.ids for encoding in encodings]

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def save(self, path: str | Path) -> None:
        """Writes the exact bytes the hash covers."""
        Path(path).write_bytes(self.json_bytes)


def token_dtype(vocab_size: int) -> np.dtype:
    """`uint16` when every id fits with Megatron's margin, else `int32` (little-endian)."""
    return np.dtype("<u2") if vocab_size < UINT16_LIMIT else np.dtype("<i4")


def load_tokenizer(path: str | Path, eos_token: str | None = None) -> PinnedTokenizer:
    """A pinned `tokenizer.json` from disk; its hash covers the file's bytes as they are."""
    path = Path(path)
    if not path.is_file():
        raise TokenizerError(f"{path}: tokenizer file not found")
    return tokenizer_from_bytes(path.read_bytes(), eos_token=eos_token, name=str(path))


def tokenizer_from_bytes(
    data: bytes, eos_token: str | None = None, name: str = "tokenizer.json"
) -> PinnedTokenizer:
    """A pinned tokenizer from `tokenizer.json` bytes (for example read from a `Store`)."""
    try:
        tokenizer = Tokenizer.from_str(data.decode("utf-8"))
    except Exception as error:  # tokenizers raises a bare Exception on bad JSON
        raise TokenizerError(f"{name}: not a Hugging Face tokenizer.json: {error}") from error
    # Corpus text never produces special-token ids (see the module docstring).
    tokenizer.encode_special_tokens = True
    eos_id = find_eos_id(tokenizer, eos_token, name)
    return PinnedTokenizer(
        tokenizer=tokenizer,
        json_bytes=data,
        sha256=hashlib.sha256(data).hexdigest(),
        eos_id=eos_id,
        pad_id=find_pad_id(tokenizer, eos_id),
        vocab_size=vocabulary_size(tokenizer),
    )


def vocabulary_size(tokenizer: Tokenizer) -> int:
    """One more than the largest id: ids need not be dense, and the dtype must hold them all."""
    return max(tokenizer.get_vocab(with_added_tokens=True).values()) + 1


def find_eos_id(tokenizer: Tokenizer, eos_token: str | None = None, name: str = "") -> int:
    """The id of `eos_token`, or of the first known EOS spelling the vocabulary has."""
    candidates = (eos_token,) if eos_token else EOS_CANDIDATES
    for token in candidates:
        token_id = tokenizer.token_to_id(token)
        if token_id is not None:
            return token_id
    raise TokenizerError(
        f"{name or 'the tokenizer'}: no end-of-document token; looked for {', '.join(candidates)}. "
        "Name the tokenizer's EOS token explicitly (eos_token=...)."
    )


def find_pad_id(tokenizer: Tokenizer, eos_id: int) -> int:
    """The padding id: the tokenizer's own padding setting, a known pad token, else EOS.

    Padding positions are recorded and masked by the loader, so reusing EOS is safe; the shard
    verifier counts EOS only outside padding.
    """
    padding = tokenizer.padding
    if padding and padding.get("pad_id") is not None:
        return int(padding["pad_id"])
    for token in PAD_CANDIDATES:
        token_id = tokenizer.token_to_id(token)
        if token_id is not None:
            return token_id
    return eos_id


@contextmanager
def tokenizer_threads(threads: int | None) -> Iterator[None]:
    """Limits the `tokenizers` library's own threads for the block.

    `threads=1` turns its parallelism off (`TOKENIZERS_PARALLELISM=false` is read at every
    call). For more threads, `RAYON_NUM_THREADS` sizes rayon's global pool, which is built once
    per process: it takes effect only if nothing in the process used the pool before.
    `None` leaves the environment alone.
    """
    if threads is None:
        yield
        return
    names = ("TOKENIZERS_PARALLELISM", "RAYON_NUM_THREADS")
    saved = {name: os.environ.get(name) for name in names}
    os.environ["TOKENIZERS_PARALLELISM"] = "false" if threads <= 1 else "true"
    os.environ.setdefault("RAYON_NUM_THREADS", str(max(1, threads)))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def train_bpe(
    texts: Iterable[str],
    vocab_size: int,
    *,
    min_frequency: int = 2,
    threads: int | None = None,
) -> PinnedTokenizer:
    """A byte-level BPE (GPT-2 pre-tokenization) trained on `texts`, `<|endoftext|>` as id 0.

    Deterministic: the same texts in the same order give byte-identical `tokenizer.json`.
    """
    if vocab_size < 257:
        raise TokenizerError(f"vocab_size {vocab_size}: a byte-level BPE needs at least 257 ids "
                             "(256 bytes and the EOS token)")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[EOS_TOKEN],
        # Every byte is in the vocabulary, so no text is ever unencodable.
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    with tokenizer_threads(threads):
        tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer_from_bytes(tokenizer.to_str().encode("utf-8"), name="trained BPE")
