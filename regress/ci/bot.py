"""The ``/bot`` PR-comment grammar: untrusted text in, a normalised command or a refusal out.

Mirrors TensorRT-LLM's GitHub bot: ``/bot run|kill|skip|reuse-pipeline|help`` with the flags of
``.github/workflows/bot-command.yml`` (NVIDIA/TensorRT-LLM @ 0cf791a2: ``--reuse-test
[pipeline-id]``, ``--disable-reuse-test``, ``--only-perf-sanity-test``, ``--debug`` with exactly
one stage, ...), ``--high-priority`` (PR #11133), and stage selectors as
``docs/source/developer-guide/ci-overview.md`` describes them: names or ``*`` wildcard patterns,
comma-separated. That page (@ 0c90a6ca) spells post-merge stages ``A100X-Triton-[Post-Merge]-1``,
the Groovy map's old keys; a later revision says names are now unbracketed and the old spelling
"silently selects nothing". Here a bracketed name resolves to the unbracketed stage, and any name
or pattern that selects no known stage is refused with the closest names.

A comment is hostile until proven otherwise, so checks run from cheapest to richest and the first
failure wins: size, author, then every character against a whitelist (printable ASCII minus
shell metacharacters; ``*``, ``[`` and ``]`` only inside a stage selector), then tokens, then
flags, then stage selectors against the known stage names. A pattern is matched by
:func:`match_stages` against those names only (a hand-made regular expression, never
``fnmatch``/``glob``, never the file system), so what comes out is always a subset of
``stages.yml``'s names. Nothing here ever reaches a shell: :mod:`regress.ci.plan` turns a parsed
``run`` into argv lists.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from regress.ci.comment import (
    GLOB_CHARACTERS,
    MAX_COMMENT_BYTES,
    SHELL_METACHARACTERS,
    BotRejection,
    check_author,
    check_text,
    load_allow_list,
    tokenize,
)
from regress.ci.yamlnodes import did_you_mean
from regress.errors import UsageError

__all__ = [
    "GLOB_CHARACTERS",
    "MAX_COMMENT_BYTES",
    "SHELL_METACHARACTERS",
    "BotCommand",
    "BotRejection",
    "RunOptions",
    "load_allow_list",
    "match_stages",
    "parse_comment",
]

_STAGE_TOKEN = re.compile(r"[A-Za-z0-9*\[][A-Za-z0-9_.*\[\]-]{0,99}")
_ITEM_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_PIPELINE_ID = re.compile(r"[0-9]{1,12}")
COMMANDS = ("run", "kill", "skip", "reuse-pipeline", "help")
STAGE_FLAGS = ("--stage-list", "--extra-stage")
LIST_FLAGS = (*STAGE_FLAGS, "--gpu-type", "--test-backend")
BOOL_FLAGS = (
    "--disable-fail-fast",
    "--skip-test",
    "--post-merge",
    "--add-multi-gpu-test",
    "--only-multi-gpu-test",
    "--disable-multi-gpu-test",
    "--only-perf-sanity-test",
    "--disable-reuse-test",
    "--detailed-log",
    "--debug",
    "--high-priority",
)
#: ``--reuse-test`` takes an optional pipeline id.
OPTIONAL_VALUE_FLAGS = ("--reuse-test",)
HELP = """/bot [-h|--help] run|kill|skip|reuse-pipeline|help ...
  run [--reuse-test [PIPELINE-ID]] [--disable-reuse-test] [--disable-fail-fast] [--skip-test]
      [--stage-list "A, B*"] [--gpu-type "H200, B200"] [--test-backend "pytorch"]
      [--add-multi-gpu-test] [--only-multi-gpu-test] [--disable-multi-gpu-test]
      [--only-perf-sanity-test] [--post-merge] [--extra-stage "A, B*"] [--detailed-log]
      [--debug (exactly one stage in --stage-list)] [--high-priority]
      Stage selectors are names or patterns with '*', matched against the known stages.
  kill                      stop the running pipeline
  skip --comment "reason"   mark the checks passed without running them
  reuse-pipeline            reuse the last pipeline's results
  help, run --help          this text
"""


@dataclass(frozen=True)
class RunOptions:
    """The flags of ``/bot run``, normalised: lists deduplicated, stage names canonical."""

    stage_list: tuple[str, ...] = ()
    extra_stage: tuple[str, ...] = ()
    gpu_type: tuple[str, ...] = ()
    test_backend: tuple[str, ...] = ()
    disable_fail_fast: bool = False
    skip_test: bool = False
    post_merge: bool = False
    add_multi_gpu_test: bool = False
    only_multi_gpu_test: bool = False
    disable_multi_gpu_test: bool = False
    only_perf_sanity_test: bool = False
    disable_reuse_test: bool = False
    detailed_log: bool = False
    debug: bool = False
    high_priority: bool = False
    reuse_test: bool = False
    reuse_pipeline_id: str | None = None


@dataclass(frozen=True)
class BotCommand:
    """A validated comment."""

    command: str
    author: str
    options: RunOptions | None = None
    comment: str | None = None

    def to_json(self) -> dict:
        doc: dict = {"schema": 1, "command": self.command, "author": self.author}
        if self.options is not None:
            opts = self.options
            doc["options"] = {
                name: list(value) if isinstance(value, tuple) else value
                for name, value in vars(opts).items()
            }
        if self.comment is not None:
            doc["comment"] = self.comment
        if self.command == "help":
            doc["text"] = HELP
        return doc

    def to_comment(self) -> str:
        """The canonical comment text for this command (parsing it gives this command back)."""
        parts = ["/bot", self.command]
        if self.options is not None:
            for name, value in vars(self.options).items():
                flag = "--" + name.replace("_", "-")
                if name == "reuse_pipeline_id":
                    continue
                if isinstance(value, tuple) and value:
                    parts += [flag, '"' + ", ".join(value) + '"']
                elif value is True:
                    parts.append(flag)
                    if name == "reuse_test" and self.options.reuse_pipeline_id is not None:
                        parts.append(self.options.reuse_pipeline_id)
        if self.comment is not None:
            parts += ["--comment", f'"{self.comment}"']
        return " ".join(parts)

    @classmethod
    def from_json(cls, doc: object) -> BotCommand:
        """Rebuild a command from :meth:`to_json` output, checking every field's type.

        This only rebuilds: callers re-validate it by parsing :meth:`to_comment` again, so a
        hand-edited document gets no further than a hostile comment would.

        Raises:
            UsageError: the document is not shaped like ``regress bot parse`` output.
        """
        if not isinstance(doc, dict) or doc.get("schema") != 1:
            raise UsageError("not JSON from `regress bot parse` (expected an object with schema 1)")
        command, author = doc.get("command"), doc.get("author")
        if not isinstance(command, str) or not isinstance(author, str):
            raise UsageError("`command` and `author` must be strings")
        comment = doc.get("comment")
        if comment is not None and not isinstance(comment, str):
            raise UsageError("`comment` must be a string")
        raw = doc.get("options")
        if raw is None:
            return cls(command, author, comment=comment)
        if not isinstance(raw, dict):
            raise UsageError("`options` must be an object")
        fields = {f.name: f for f in dataclasses.fields(RunOptions)}
        values: dict[str, object] = {}
        for name, value in raw.items():
            if name not in fields:
                raise UsageError(f"unknown option {name!r}")
            default = fields[name].default
            if isinstance(default, tuple):
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise UsageError(f"option {name!r} must be a list of strings")
                value = tuple(value)
            elif isinstance(default, bool):
                if not isinstance(value, bool):
                    raise UsageError(f"option {name!r} must be true or false")
            elif value is not None and not isinstance(value, str):
                raise UsageError(f"option {name!r} must be a string or null")
            values[name] = value
        return cls(command, author, options=RunOptions(**values), comment=comment)


def _split_list(flag: str, value: str) -> tuple[str, ...]:
    items = [item.strip() for item in value.split(",")]
    if not value.strip() or any(not item for item in items):
        raise BotRejection(
            f"/bot comment rejected: {flag} needs a comma-separated list, got {value!r}"
        )
    grammar = _STAGE_TOKEN if flag in STAGE_FLAGS else _ITEM_TOKEN
    extra = ", '*' and '[]'" if flag in STAGE_FLAGS else ""
    for item in items:
        if not grammar.fullmatch(item):
            raise BotRejection(
                f"/bot comment rejected: {flag} item {item!r} may hold only letters, digits, "
                f"'_', '.', '-'{extra}"
            )
    return tuple(dict.fromkeys(items))


def _pattern(selector: str) -> re.Pattern[str]:
    """``*`` -> any run of characters; everything else literal (brackets included)."""
    return re.compile("".join(".*" if ch == "*" else re.escape(ch) for ch in selector))


def match_stages(selector: str, names: Sequence[str]) -> list[str]:
    """The known stage names a selector picks, in ``names`` order; never anything else.

    A plain name picks itself; ``X-[Post-Merge]-1`` picks ``X-Post-Merge-1`` (the Groovy map's old
    spelling); a selector with ``*`` picks every name it matches as a whole. Only ``names`` are
    ever looked at, so a selector cannot reach a path, a glob or a shell.
    """
    unbracketed = selector.replace("[", "").replace("]", "")
    if "*" not in selector:
        return [n for n in names if n in (selector, unbracketed)][:1]
    pattern = _pattern(unbracketed)
    return [n for n in names if pattern.fullmatch(n)]


def _resolve_stages(flag: str, selectors: tuple[str, ...], stages: Mapping) -> tuple[str, ...]:
    names = list(stages)
    chosen: list[str] = []
    for selector in selectors:
        found = match_stages(selector, names)
        if not found:
            what = "stage pattern" if "*" in selector else "unknown stage"
            hint = did_you_mean(selector.replace("[", "").replace("]", ""), names)
            raise BotRejection(
                f"/bot comment rejected: {what} {selector!r}"
                f"{' matches no stage' if '*' in selector else ''}{hint} "
                "(stages are defined in test-lists/stages.yml)"
            )
        chosen.extend(found)
    return tuple(dict.fromkeys(chosen))


def _parse_run(
    args: list[str], stages: Mapping, gpu_types: set[str], backends: set[str]
) -> RunOptions:
    values: dict[str, object] = {}
    i = 0
    while i < len(args):
        token = args[i]
        flag, eq, inline = token.partition("=")
        name = flag[2:].replace("-", "_")
        if flag in LIST_FLAGS:
            if eq:
                value: object = inline
            elif i + 1 < len(args) and not args[i + 1].startswith("--"):
                i += 1
                value = args[i]
            else:
                raise BotRejection(f"/bot comment rejected: {flag} needs a value")
        elif flag in OPTIONAL_VALUE_FLAGS:
            pipeline = inline if eq else None
            if not eq and i + 1 < len(args) and not args[i + 1].startswith("-"):
                i += 1
                pipeline = args[i]
            if pipeline is not None and not _PIPELINE_ID.fullmatch(pipeline):
                raise BotRejection(
                    f"/bot comment rejected: {flag} takes an optional pipeline id (digits), "
                    f"got {pipeline!r}"
                )
            if "reuse_pipeline_id" in values or name in values:
                raise BotRejection(f"/bot comment rejected: {flag} given twice")
            values["reuse_pipeline_id"] = pipeline
            value = True
        elif flag in BOOL_FLAGS and not eq:
            value = True
        else:
            known = LIST_FLAGS + BOOL_FLAGS + OPTIONAL_VALUE_FLAGS
            what = "unknown flag" if token.startswith("-") else "unexpected argument"
            raise BotRejection(
                f"/bot comment rejected: {what} {token!r} for run{did_you_mean(flag, known)}"
            )
        if name in values:
            raise BotRejection(f"/bot comment rejected: {flag} given twice")
        values[name] = _split_list(flag, value) if isinstance(value, str) else value
        i += 1
    for name, flag in (("stage_list", "--stage-list"), ("extra_stage", "--extra-stage")):
        if name in values:
            values[name] = _resolve_stages(flag, values[name], stages)  # type: ignore[arg-type]
    for name, known in (("gpu_type", gpu_types), ("test_backend", backends)):
        lowered = {k.lower(): k for k in known}
        picked = []
        for item in values.get(name, ()):  # type: ignore[union-attr]
            if item.lower() not in lowered:
                raise BotRejection(
                    f"/bot comment rejected: unknown {name.replace('_', ' ')} {item!r}; known: {', '.join(sorted(known))}"
                )
            picked.append(lowered[item.lower()])
        if name in values:
            values[name] = tuple(picked)
    options = RunOptions(**values)  # type: ignore[arg-type]
    _check_consistent(options)
    return options


def _check_consistent(o: RunOptions) -> None:
    def refuse(why: str) -> None:
        raise BotRejection(f"/bot comment rejected: {why}")

    if o.only_multi_gpu_test and (o.disable_multi_gpu_test or o.add_multi_gpu_test):
        refuse("--only-multi-gpu-test contradicts --add/--disable-multi-gpu-test")
    if o.add_multi_gpu_test and o.disable_multi_gpu_test:
        refuse("--add-multi-gpu-test contradicts --disable-multi-gpu-test")
    if o.reuse_test and o.disable_reuse_test:
        refuse("--reuse-test contradicts --disable-reuse-test")
    if o.skip_test and (o.stage_list or o.extra_stage):
        refuse("--skip-test runs no test stage; drop --stage-list/--extra-stage")
    if o.debug and len(o.stage_list) != 1:
        refuse("--debug opens one stage's container: give exactly one stage in --stage-list")
    # --post-merge with --stage-list is upstream usage (PR #14985): the listed stages run in the
    # post-merge pipeline. Filters that would silently do nothing beside an explicit list are not.
    filters = (
        o.gpu_type
        or o.test_backend
        or o.add_multi_gpu_test
        or o.only_multi_gpu_test
        or o.disable_multi_gpu_test
        or o.only_perf_sanity_test
    )
    if o.stage_list and filters:
        refuse(
            "--stage-list names the stages explicitly; drop --gpu-type, --test-backend, "
            "--only-perf-sanity-test and the multi-GPU flags (or drop --stage-list)"
        )


def parse_comment(
    comment: str,
    *,
    author: str,
    allowed: frozenset[str],
    stages: Mapping,
    allow_file: str | None = None,
) -> BotCommand:
    """Validate and normalise one PR comment.

    Args:
        comment: the raw comment body (untrusted).
        author: the commenter's GitHub login (untrusted).
        allowed: lower-cased logins from :func:`load_allow_list`.
        stages: stage name -> :class:`regress.ci.testlist.Stage`, from ``test-lists/stages.yml``.
        allow_file: where ``allowed`` was read, named when an author is refused.

    Raises:
        BotRejection: with the first reason found (exit code 2).
    """
    text = check_text(comment)
    author = check_author(author, allowed, allow_file=allow_file)
    tokens = tokenize(text, glob_flags=STAGE_FLAGS)
    if not tokens or tokens[0] != "/bot":
        raise BotRejection("/bot comment rejected: a bot comment starts with '/bot'")
    help_words = ("help", "-h", "--help")
    if (
        len(tokens) == 1
        or tokens[1] in help_words
        or tokens[1:] in (["run", "-h"], ["run", "--help"])
    ):
        if len(tokens) > 2 and tokens[1] != "run":
            raise BotRejection("/bot comment rejected: help takes no arguments")
        return BotCommand("help", author)
    command, args = tokens[1], tokens[2:]
    if command not in COMMANDS:
        raise BotRejection(
            f"/bot comment rejected: unknown command {command!r}{did_you_mean(command, COMMANDS)}; try '/bot help'"
        )
    if command == "run":
        gpu_types = {s.gpu_type for s in stages.values()}
        backends = {s.backend for s in stages.values()}
        return BotCommand("run", author, options=_parse_run(args, stages, gpu_types, backends))
    if command == "skip":
        if len(args) != 2 or args[0] != "--comment" or not args[1].strip():
            raise BotRejection('/bot comment rejected: use /bot skip --comment "reason"')
        globs = sorted({ch for ch in args[1] if ch in GLOB_CHARACTERS})
        if globs:  # e.g. --comment --stage-list=*: a selector's characters outside a selector
            raise BotRejection(
                f"/bot comment rejected: shell metacharacter {globs[0]!r} in the reason"
            )
        return BotCommand("skip", author, comment=" ".join(args[1].split()))
    if args:
        raise BotRejection(f"/bot comment rejected: {command} takes no arguments, got {args[0]!r}")
    return BotCommand(command, author)
