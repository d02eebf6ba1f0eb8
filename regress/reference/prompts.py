"""The reference engine's built-in prompts and the byte-level tokenizer that turns them into ids.

Why a tokenizer of our own: the reference engine must run offline in CI, so nothing may be
downloaded at run time (no Hugging Face tokenizer, no vocabulary file). Ids are the UTF-8 bytes of
the text plus two specials, so every string round-trips exactly and the vocabulary is fixed at 258.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from importlib.resources import files

from regress.errors import UsageError

VOCAB_SIZE = 258
"""Ids 0..255 are UTF-8 bytes; 256 and 257 are the specials below."""
BOS_ID = 256
EOS_ID = 257

NUM_PROMPTS = 80
"""How many prompts ship in ``data/prompts.jsonl`` (8 categories x 10)."""


def encode(text: str, *, bos: bool = True) -> list[int]:
    """Token ids of ``text``: its UTF-8 bytes, with BOS first unless ``bos`` is false.

    Args:
        text: any string; unpaired surrogates are not encodable and raise ``UnicodeEncodeError``.
        bos: prepend ``BOS_ID``, as a decoder-only model expects at the start of a sequence.
    """
    ids = list(text.encode("utf-8"))
    return [BOS_ID, *ids] if bos else ids


def decode(ids: Iterable[int]) -> str:
    """Text of ``ids``, skipping BOS/EOS.

    Generated ids need not form valid UTF-8 (a model can stop mid-character), so invalid bytes
    become U+FFFD instead of raising.

    Raises:
        ValueError: an id outside ``0..VOCAB_SIZE-1``; it cannot have come from this vocabulary.
    """
    data = bytearray()
    for token in ids:
        if token in (BOS_ID, EOS_ID):
            continue
        if not 0 <= token < 256:
            raise ValueError(f"token id {token} is outside the byte vocabulary 0..{VOCAB_SIZE - 1}")
        data.append(token)
    return data.decode("utf-8", errors="replace")


@functools.lru_cache(maxsize=1)
def _records() -> tuple[dict, ...]:
    text = (files("regress.reference") / "data" / "prompts.jsonl").read_text(encoding="utf-8")
    return tuple(json.loads(line) for line in text.splitlines() if line.strip())


def load_prompt_records() -> list[dict]:
    """The built-in prompts as ``{"id", "category", "prompt"}`` dicts, in file order.

    Read through ``importlib.resources`` so it works from a wheel or a zip, and parsed once per
    process; each call returns fresh copies, so a caller that edits one cannot poison the cache.
    """
    return [dict(record) for record in _records()]


def load_prompts(limit: int | None = None) -> list[list[int]]:
    """Token ids (BOS first) of the first ``limit`` built-in prompts, all of them when ``None``.

    Raises:
        UsageError: ``limit`` is below 1 or above the number of built-in prompts.
    """
    records = _records()
    if limit is None:
        limit = len(records)
    elif not 1 <= limit <= len(records):
        raise UsageError(
            f"asked for {limit} built-in prompts, but there are {len(records)}; "
            f"pass a number from 1 to {len(records)}, or supply your own prompts file."
        )
    return [encode(record["prompt"]) for record in records[:limit]]
