"""`elake`'s options: every command's help, and the flags made from spec models' fields."""

from __future__ import annotations

from typing import Any

import pytest
import typer

from episodelake.api import cli
from episodelake.api.cli.app import Commands
from episodelake.api.cli.model_options import Fields, flag, with_fields
from episodelake.lake.export.spec import ExportSpec
from episodelake.trainer.advantages import AdvantageConfig
from episodelake.trainer.config import TrainConfig


def commands(group: Any = None, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every command and group of `elake` with its path, the root first."""
    group = typer.main.get_command(cli.app) if group is None else group
    found = [(path, group)]
    for name, command in getattr(group, "commands", {}).items():
        found += commands(command, (*path, name))
    return found


def help_of(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        cli.main([*argv, "--help"])
    assert exit_.value.code == 0, argv
    return " ".join(capsys.readouterr().out.split())


def test_every_command_has_help_naming_each_option(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # no wrapping inside a description
    every = commands()
    assert len(every) > 25
    for path, command in every:
        shown = help_of(capsys, *path)
        opening = (command.help or "").split("\n\n")[0]
        assert opening and " ".join(opening.split()) in shown, path  # what it does
        for param in command.params:
            names = [param.metavar or param.name.upper()] if param.param_type_name == "argument" \
                else [*param.opts, *param.secondary_opts]
            for name in names:
                assert name in shown, (path, name)
            assert param.help and " ".join(param.help.split()) in shown, (path, param.name)
        # a group's help lists its commands, each with its summary
        for name, sub in getattr(command, "commands", {}).items():
            assert f"{name} {' '.join(sub.get_short_help_str(1000).split())}" in shown, (path, name)


def test_the_root_lists_every_command_in_order(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    listing = out.split("Commands:\n")[1].splitlines()
    names = [line.split()[0] for line in listing if line.startswith("  ") and not line.startswith("   ")]
    assert names == ["info", "sql", "tag", "optimize", "recover", "import", "export", "watch", "rollout",
                     "demo", "collect", "serve-env", "judge", "rekey", "rerun", "branch", "enrich", "search", "similar", "episode", "steps", "purge", "train", "lineage", "serve",
                     "openapi", "user"]
    assert "$ELAKE_LAKE" in out and "--debug" in out


def test_a_group_without_its_command_prints_its_help(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["export"])
    assert exit_.value.code == 2
    out = capsys.readouterr().out
    assert "sft" in out and "clawgui" in out


# -- flags made from a spec model's fields ---------------------------------------------------------
def test_export_and_train_flags_carry_their_fields_descriptions(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")
    # redact_rules is a nested model: the command line gives it as a file, --redact-config
    for argv, models, skip in ((["export", "sft"], [ExportSpec], {"format", "out", "redact_rules"}),
                               (["train"], [TrainConfig, AdvantageConfig], {"advantages"})):
        shown = help_of(capsys, *argv)
        for model in models:
            for name, field in model.model_fields.items():
                if name in skip:
                    continue
                assert f"{flag(name)} " in shown, name
                assert " ".join(field.description.split()) in shown, name
    assert "--no-step-rewards" in shown and "--reference-defaults" in shown


@pytest.mark.parametrize(("argv", "message"), [
    (["export", "sft", "--format", "trl", "--out", "x", "--history-images", "-1"],
     "elake export: history_images: input should be greater than or equal to 0, not -1"),
    (["export", "sft", "--format", "trl", "--out", "x", "--val-fraction", "1"],
     "elake export: val_fraction: input should be less than 1, not 1.0"),
    (["train", "--iterations", "0"],
     "elake train: iterations: input should be greater than or equal to 1, not 0"),
    (["train", "--gamma", "1.5"], "elake train: gamma: input should be less than or equal to 1, not 1.5"),
    (["train", "--reference-defaults", "--no-revisit-rewards"],
     "drop --no-revisit-rewards or --reference-defaults"),
])
def test_a_flag_outside_its_fields_range_is_refused_naming_the_field(tmp_path, capsys, argv, message):
    """The model checks the range (exit 1, the field named), as it does for the API and Python
    callers; nothing is read or written before."""
    assert cli.main(["--lake", str(tmp_path / "none"), *argv]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "none").exists()


def test_a_flag_of_the_wrong_type_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", "--granularity-typo", "1"])
    assert exit_.value.code == 2
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", "--algo", "ppo"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("elake train: invalid value for '--algo': 'ppo' is not one of 'gigpo', 'grpo'")
    assert err[-1].endswith("(see `elake train --help`)") and len(err) == 2


@pytest.mark.parametrize(("argv", "line"), [
    (["judge", "--model-url", "u", "--model", "m", "--set", "a", "--where", "b"],
     "elake judge: give only one of --set, --where (see `elake judge --help`)"),
    (["collect", "remote", "--policy", "random"],
     "elake collect remote: give one of --server, --server-file (see `elake collect remote --help`)"),
    (["serve-env"], "elake serve-env: --sim is required (see `elake serve-env --help`)"),
])
def test_options_that_exclude_each_other_are_a_usage_error(capsys, argv, line):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2 and capsys.readouterr().err == line + "\n"


def test_given_holds_exactly_the_flags_given_as_their_fields_types():
    """Flags parse to the field's type; those not given stay out of `given`, so the model's
    default (or the command's base settings) applies."""
    seen: list[dict] = []
    app = Commands()

    @app.command("probe", summary="probe")
    @with_fields(Fields(AdvantageConfig, heading="advantages"),
                 Fields(ExportSpec, only=("max_pixels", "style")))
    def probe(given: dict[str, Any], other: int = 0) -> None:
        seen.append(given)

    command = typer.main.get_command(app)
    command.main(["--gamma", "0.5", "--no-revisit-rewards", "--style", "gui-owl", "--other", "2"],
                 standalone_mode=False)
    command.main([], standalone_mode=False)
    assert seen == [{"gamma": 0.5, "revisit_rewards": False, "style": "gui-owl"}, {}]
    assert isinstance(seen[0]["gamma"], float)


def test_a_command_parameter_named_like_a_field_is_refused():
    with pytest.raises(TypeError, match=r"\['gamma'\]"):
        @with_fields(Fields(AdvantageConfig))
        def clash(given: dict[str, Any], gamma: float = 0.0) -> None: ...
