"""Tests for the built-in prompt set and the byte-level tokenizer."""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from importlib.resources import files

import pytest
from hypothesis import given
from hypothesis import strategies as st

from regress.errors import UsageError
from regress.reference import prompts
from regress.reference.prompts import (
    BOS_ID,
    EOS_ID,
    NUM_PROMPTS,
    VOCAB_SIZE,
    decode,
    encode,
    load_prompt_records,
    load_prompts,
)

CATEGORIES = (
    "writing",
    "roleplay",
    "reasoning",
    "math",
    "coding",
    "extraction",
    "stem",
    "humanities",
)
# Text hypothesis can draw that UTF-8 can encode: everything but lone surrogates.
encodable_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)))


# --- the prompt file -------------------------------------------------------------------------------


def test_there_are_80_prompts_with_the_expected_fields() -> None:
    records = load_prompt_records()
    assert len(records) == NUM_PROMPTS == 80
    for record in records:
        assert set(record) == {"id", "category", "prompt"}
        assert all(isinstance(value, str) for value in record.values())


def test_ids_and_texts_are_unique() -> None:
    records = load_prompt_records()
    assert len({r["id"] for r in records}) == len(records)
    assert len({r["prompt"] for r in records}) == len(records)


def test_ten_prompts_per_category_with_ids_named_after_it() -> None:
    records = load_prompt_records()
    assert collections.Counter(r["category"] for r in records) == dict.fromkeys(CATEGORIES, 10)
    for record in records:
        category, number = record["id"].rsplit("-", 1)
        assert category == record["category"]
        assert 1 <= int(number) <= 10 and len(number) == 2


def test_prompts_are_plain_ascii_within_length_bounds_and_varied() -> None:
    texts = [r["prompt"] for r in load_prompt_records()]
    assert all(text.isascii() for text in texts)
    assert all(60 <= len(text) <= 400 for text in texts)
    assert all(text == text.strip() for text in texts)
    # Varied lengths are what exercise padding and scheduling; demand a real spread.
    assert min(map(len, texts)) < 100
    assert sum(len(text) >= 350 for text in texts) >= 3


def test_file_is_one_json_object_per_line() -> None:
    raw = (files("regress.reference") / "data" / "prompts.jsonl").read_bytes()
    assert raw.isascii() and raw.endswith(b"\n")
    lines = raw.decode("ascii").splitlines()
    assert len(lines) == NUM_PROMPTS
    assert all(isinstance(json.loads(line), dict) for line in lines)


def test_records_are_copies_so_callers_cannot_corrupt_the_cache() -> None:
    first = load_prompt_records()
    first[0]["prompt"] = "changed"
    first.clear()
    again = load_prompt_records()
    assert len(again) == NUM_PROMPTS
    assert again[0]["prompt"] != "changed"


def test_the_file_is_parsed_once_per_process() -> None:
    load_prompt_records()
    load_prompts(3)
    before = prompts._records.cache_info()
    load_prompt_records()
    load_prompts()
    after = prompts._records.cache_info()
    assert after.misses == before.misses
    assert after.hits == before.hits + 2


# --- the tokenizer -----------------------------------------------------------------------------


def test_vocabulary_constants() -> None:
    assert (VOCAB_SIZE, BOS_ID, EOS_ID) == (258, 256, 257)


def test_encode_is_utf8_bytes_with_bos_first_by_default() -> None:
    assert encode("hi") == [BOS_ID, ord("h"), ord("i")]
    assert encode("hi", bos=False) == [104, 105]
    assert encode("") == [BOS_ID]
    assert encode("", bos=False) == []
    assert encode("\u00e9", bos=False) == [0xC3, 0xA9]


@given(encodable_text)
def test_round_trip_with_and_without_bos(text: str) -> None:
    assert decode(encode(text)) == text
    assert decode(encode(text, bos=False)) == text


@given(encodable_text, st.booleans())
def test_encoded_ids_are_in_vocabulary_and_bos_only_leads(text: str, bos: bool) -> None:
    ids = encode(text, bos=bos)
    assert all(0 <= i < VOCAB_SIZE for i in ids)
    assert EOS_ID not in ids
    assert ids.count(BOS_ID) == int(bos)
    if bos:
        assert ids[0] == BOS_ID
    assert len(ids) == len(text.encode("utf-8")) + int(bos)


def test_decode_skips_specials_anywhere() -> None:
    assert decode([BOS_ID, 97, EOS_ID, 98, EOS_ID, EOS_ID]) == "ab"
    assert decode([]) == ""
    assert decode(iter([BOS_ID, 99])) == "c"


def test_decode_replaces_invalid_utf8_instead_of_raising() -> None:
    # A model can stop after the first byte of a two-byte character.
    assert decode([104, 0xC3]) == "h\ufffd"
    assert decode([0xFF, 97]) == "\ufffda"


@pytest.mark.parametrize("bad", [-1, 258, 1000])
def test_decode_rejects_ids_outside_the_vocabulary(bad: int) -> None:
    with pytest.raises(ValueError, match="outside the byte vocabulary"):
        decode([97, bad])


# --- load_prompts ------------------------------------------------------------------------------


def test_load_prompts_returns_all_80_tokenized_in_file_order() -> None:
    ids = load_prompts()
    records = load_prompt_records()
    assert len(ids) == NUM_PROMPTS
    assert [decode(seq) for seq in ids] == [r["prompt"] for r in records]
    assert all(seq[0] == BOS_ID and BOS_ID not in seq[1:] for seq in ids)
    assert all(0 <= i < VOCAB_SIZE for seq in ids for i in seq)
    # ASCII text: one id per character plus BOS.
    assert [len(seq) for seq in ids] == [len(r["prompt"]) + 1 for r in records]


@pytest.mark.parametrize("limit", [1, 7, 79, 80])
def test_limit_takes_a_prefix(limit: int) -> None:
    assert load_prompts(limit) == load_prompts()[:limit]
    assert load_prompts(limit=limit) == load_prompts()[:limit]


@pytest.mark.parametrize("limit", [0, -3, 81, 1000])
def test_limit_out_of_range_is_a_usage_error(limit: int) -> None:
    with pytest.raises(UsageError, match=r"from 1 to 80") as info:
        load_prompts(limit)
    assert info.value.exit_code == 2
    assert str(limit) in str(info.value)


def test_calls_return_independent_lists() -> None:
    first = load_prompts(2)
    first[0].append(EOS_ID)
    first.append([1])
    assert load_prompts(2) == [encode(r["prompt"]) for r in load_prompt_records()[:2]]


def test_importing_the_module_does_not_import_torch() -> None:
    # A fresh interpreter: this one may already hold torch from other tests.
    code = "import sys, regress.reference.prompts; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
