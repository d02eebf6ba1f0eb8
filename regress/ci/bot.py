"""The ``/bot`` PR-comment grammar: untrusted text in, a normalised command or a refusal out.

Mirrors TensorRT-LLM's GitHub bot (``/bot run|kill|skip|reuse-pipeline|help``, flags as in the
upstream pull-request template). A comment is hostile until proven otherwise, so checks run from
cheapest to richest and the first failure wins: size, author, then every character against a
whitelist (printable ASCII minus shell metacharacters), then tokens, then flags, then stage names
against ``test-lists/stages.yml``. Nothing here ever reaches a shell: :mod:`regress.ci.plan`
turns a parsed ``run`` into argv lists.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from regress.ci.yamlnodes import did_you_mean
from regress.errors import UsageError

MAX_COMMENT_BYTES = 4096
SHELL_METACHARACTERS = frozenset(";|&$`<>(){}[]*?!~\\'")
_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}")
_STAGE_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
COMMANDS = ("run", "kill", "skip", "reuse-pipeline", "help")
LIST_FLAGS = ("--stage-list", "--extra-stage", "--gpu-type", "--test-backend")
BOOL_FLAGS = (
    "--disable-fail-fast",
    "--skip-test",
    "--post-merge",
    "--add-multi-gpu-test",
    "--only-multi-gpu-test",
    "--disable-multi-gpu-test",
    "--detailed-log",
)
HELP = """/bot [-h|--help] run|kill|skip|reuse-pipeline|help ...
  run [--stage-list "A, B"] [--extra-stage "A, B"] [--gpu-type "H200, B200"]
      [--test-backend "pytorch"] [--disable-fail-fast] [--skip-test] [--post-merge]
      [--add-multi-gpu-test] [--only-multi-gpu-test] [--disable-multi-gpu-test] [--detailed-log]
  kill                      stop the running pipeline
  skip --comment "reason"   mark the checks passed without running them
  reuse-pipeline            reuse the last pipeline's results
  help                      this text
"""


class BotRejection(UsageError):
    """The comment (or its author) was refused; the message says why, safe to echo."""


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
    detailed_log: bool = False


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
                if isinstance(value, tuple) and value:
                    parts += [flag, '"' + ", ".join(value) + '"']
                elif value is True:
                    parts.append(flag)
        if self.comment is not None:
            parts += ["--comment", f'"{self.comment}"']
        return " ".join(parts)


def load_allow_list(path: Path) -> frozenset[str]:
    """GitHub logins allowed to trigger the bot: one per line, ``#`` comments; case-insensitive."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the allow list {path}: {exc}. Pass --allow FILE.") from None
    logins = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if not _LOGIN.fullmatch(line):
            raise UsageError(f"{path}:{number}: {line!r} is not a GitHub login")
        logins.add(line.lower())
    return frozenset(logins)


def _char_problem(ch: str, column: int) -> str | None:
    if ch in SHELL_METACHARACTERS:
        return f"shell metacharacter {ch!r} at column {column}"
    if ord(ch) < 0x20 or ord(ch) == 0x7F:
        label = {"\n": "newline", "\r": "carriage return", "\t": "tab", "\x00": "NUL"}.get(ch)
        return f"control character {label or f'U+{ord(ch):04X}'} at column {column}"
    if ord(ch) > 0x7E:
        name = unicodedata.name(ch, "unnamed")
        folded = unicodedata.normalize("NFKC", ch)
        if folded.isascii() and folded.isprintable() and folded.strip():
            return f"U+{ord(ch):04X} {name} at column {column} looks like ASCII {folded!r}; type it plainly"
        return (
            f"non-ASCII character U+{ord(ch):04X} {name} at column {column}; comments must be ASCII"
        )
    return None


def check_text(comment: str) -> str:
    """Refuse over-long, non-ASCII, control and shell-metacharacter text; return it stripped."""
    size = len(comment.encode("utf-8", "surrogatepass"))
    if size > MAX_COMMENT_BYTES:
        raise BotRejection(
            f"/bot comment rejected: {size} bytes is over the {MAX_COMMENT_BYTES}-byte limit"
        )
    # Outer whitespace (GitHub appends a newline) is harmless; anything inside is checked.
    text = comment.strip(" \r\n")
    for column, ch in enumerate(text, start=1):
        problem = _char_problem(ch, column)
        if problem:
            raise BotRejection(f"/bot comment rejected: {problem}")
    return text


def check_author(author: str, allowed: frozenset[str]) -> str:
    if not _LOGIN.fullmatch(author):
        raise BotRejection(
            f"/bot comment rejected: author {author[:60]!a} is not a valid GitHub login"
        )
    if author.lower() not in allowed:
        raise BotRejection(f"/bot comment rejected: {author} is not on the allow list of bot users")
    return author


def tokenize(text: str) -> list[str]:
    """Split on spaces; ``"..."`` groups words (no escapes; quotes cannot nest)."""
    tokens: list[str] = []
    for match in re.finditer(r'"([^"]*)"|([^\s"]+)|(")', text):
        if match.start() > 0 and not text[match.start() - 1].isspace():
            raise BotRejection(
                f"/bot comment rejected: put a space before column {match.start() + 1}"
            )
        if match.group(3) is not None:
            raise BotRejection(
                f"/bot comment rejected: unbalanced quote at column {match.start() + 1}"
            )
        tokens.append(match.group(1) if match.group(1) is not None else match.group(2))
    return tokens


def _split_list(flag: str, value: str) -> tuple[str, ...]:
    items = [item.strip() for item in value.split(",")]
    if not value.strip() or any(not item for item in items):
        raise BotRejection(
            f"/bot comment rejected: {flag} needs a comma-separated list, got {value!r}"
        )
    for item in items:
        if not _STAGE_TOKEN.fullmatch(item):
            raise BotRejection(
                f"/bot comment rejected: {flag} item {item!r} may hold only letters, digits, '_', '.', '-'"
            )
    return tuple(dict.fromkeys(items))


def _parse_run(
    args: list[str], stages: dict, gpu_types: set[str], backends: set[str]
) -> RunOptions:
    values: dict[str, object] = {}
    i = 0
    while i < len(args):
        token = args[i]
        flag, eq, inline = token.partition("=")
        name = flag[2:].replace("-", "_")
        if flag in LIST_FLAGS:
            if eq:
                value = inline
            elif i + 1 < len(args) and not args[i + 1].startswith("--"):
                i += 1
                value = args[i]
            else:
                raise BotRejection(f"/bot comment rejected: {flag} needs a value")
        elif flag in BOOL_FLAGS and not eq:
            value = True
        else:
            known = LIST_FLAGS + BOOL_FLAGS
            what = "unknown flag" if token.startswith("-") else "unexpected argument"
            raise BotRejection(
                f"/bot comment rejected: {what} {token!r} for run{did_you_mean(flag, known)}"
            )
        if name in values:
            raise BotRejection(f"/bot comment rejected: {flag} given twice")
        values[name] = _split_list(flag, value) if isinstance(value, str) else value
        i += 1
    for name in ("stage_list", "extra_stage"):
        canonical = []
        for stage in values.get(name, ()):  # type: ignore[union-attr]
            if stage not in stages:
                hint = did_you_mean(stage, stages)
                raise BotRejection(
                    f"/bot comment rejected: unknown stage {stage!r}{hint} (stages are defined in test-lists/stages.yml)"
                )
            canonical.append(stage)
        if name in values:
            values[name] = tuple(canonical)
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
    if o.only_multi_gpu_test and (o.disable_multi_gpu_test or o.add_multi_gpu_test):
        raise BotRejection(
            "/bot comment rejected: --only-multi-gpu-test contradicts --add/--disable-multi-gpu-test"
        )
    if o.add_multi_gpu_test and o.disable_multi_gpu_test:
        raise BotRejection(
            "/bot comment rejected: --add-multi-gpu-test contradicts --disable-multi-gpu-test"
        )
    if o.skip_test and (o.stage_list or o.extra_stage):
        raise BotRejection(
            "/bot comment rejected: --skip-test runs no test stage; drop --stage-list/--extra-stage"
        )
    filters = (
        o.gpu_type
        or o.test_backend
        or o.post_merge
        or o.add_multi_gpu_test
        or o.only_multi_gpu_test
        or o.disable_multi_gpu_test
    )
    if o.stage_list and filters:
        raise BotRejection(
            "/bot comment rejected: --stage-list names the stages explicitly; drop --gpu-type, "
            "--test-backend, --post-merge and the multi-GPU flags (or drop --stage-list)"
        )


def parse_comment(
    comment: str, *, author: str, allowed: frozenset[str], stages: dict
) -> BotCommand:
    """Validate and normalise one PR comment.

    Args:
        comment: the raw comment body (untrusted).
        author: the commenter's GitHub login (untrusted).
        allowed: lower-cased logins from :func:`load_allow_list`.
        stages: stage name -> :class:`regress.ci.testlist.Stage`, from ``test-lists/stages.yml``.

    Raises:
        BotRejection: with the first reason found (exit code 2).
    """
    text = check_text(comment)
    author = check_author(author, allowed)
    tokens = tokenize(text)
    if not tokens or tokens[0] != "/bot":
        raise BotRejection("/bot comment rejected: a bot comment starts with '/bot'")
    if len(tokens) == 1 or tokens[1] in ("help", "-h", "--help"):
        if len(tokens) > 2:
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
        return BotCommand("skip", author, comment=" ".join(args[1].split()))
    if args:
        raise BotRejection(f"/bot comment rejected: {command} takes no arguments, got {args[0]!r}")
    return BotCommand(command, author)
