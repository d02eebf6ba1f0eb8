"""The prompts of a profile: ``--prompts`` JSONL files (token ids or text), or the engine's own."""

from __future__ import annotations

import json
import os

from regress.acceptance.engines import AcceptanceEngine, Prompt
from regress.errors import UsageError
from regress.files import read_text


def parse_prompt_line(line: str, where: str) -> Prompt:
    """One JSONL line: ``{"token_ids": [int, ...]}`` or ``{"prompt": "text"}``."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}: not JSON ({exc.msg})") from exc
    if not isinstance(obj, dict):
        raise UsageError(f'{where}: expected an object with "token_ids" or "prompt"')
    if "token_ids" in obj:
        ids = obj["token_ids"]
        if (
            not isinstance(ids, list)
            or not ids
            or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in ids)
        ):
            raise UsageError(f'{where}: "token_ids" must be a non-empty list of non-negative ints')
        return ids
    if "prompt" in obj:
        text = obj["prompt"]
        if not isinstance(text, str) or not text:
            raise UsageError(f'{where}: "prompt" must be a non-empty string')
        return text
    raise UsageError(f'{where}: expected a "token_ids" or a "prompt" key, got {sorted(obj)}')


def load_prompt_file(path: str | os.PathLike, limit: int | None = None) -> list[Prompt]:
    """Read prompts from a JSONL file; blank lines are skipped.

    Raises:
        UsageError: unreadable file, a malformed line (named by line number), or no prompts.
    """
    text = read_text(path, what="prompts file")
    prompts: list[Prompt] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            prompts.append(parse_prompt_line(line, f"{path}:{n}"))
        if limit is not None and len(prompts) >= limit:
            break
    if not prompts:
        raise UsageError(
            f'prompts file {path} holds no prompts; one JSON object per line, e.g. {{"token_ids": [1, 2, 3]}}'
        )
    return prompts


#: The report's ``config["prompts"]`` when the engine's built-in prompts were used.
BUILTIN = "builtin"


def resolve_prompts(
    engine: AcceptanceEngine, path: str | os.PathLike | None, limit: int | None = None
) -> tuple[list[Prompt], str]:
    """The prompts to profile ``engine`` on, as token ids where the engine tokenizes, and a label.

    A ``path`` wins; without one the engine's ``default_prompts(limit)`` are used (an engine
    without built-in prompts demands a file). Text is tokenized here, before any work, so an
    engine that refuses a prompt does so first.

    Returns:
        The prompts and what they are, for the report (the file's path, or :data:`BUILTIN`).

    Raises:
        UsageError: a bad prompts file, or no file for an engine without built-in prompts.
    """
    if path is not None:
        prompts, label = load_prompt_file(path, limit=limit), str(path)
    elif hasattr(engine, "default_prompts"):
        prompts, label = engine.default_prompts(limit), BUILTIN
    else:
        raise UsageError(
            f"the {engine.name} engine has no built-in prompts; pass --prompts FILE.jsonl"
        )
    tokenize = getattr(engine, "tokenize", None)
    if tokenize is not None:
        prompts = [tokenize(p) if isinstance(p, str) else p for p in prompts]
    return list(prompts), label
