"""One error family: device errors are not storage errors, every class the product defines has
an HTTP status in the API's one table (tests/api/test_errors_api.py: the API answers each with
it), and the command line prints any of them as one line."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from episodelake.api.errors import STATUS, status_of
from episodelake.lake.storage import errors

PACKAGES = ("episodelake.lake", "episodelake.collectors", "episodelake.trainer", "episodelake.api")


def product_modules() -> list[str]:
    """Every module of the product that imports here (optional extras such as Ray or vLLM
    may be missing; their modules cannot define a class this process could raise)."""
    names = []
    for package in PACKAGES:
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, f"{package}."):
            if info.name.endswith(".__main__"):  # runs a program when imported
                continue
            try:
                importlib.import_module(info.name)
            except ImportError as exc:
                if (exc.name or "").startswith("episodelake"):  # the product's own import is broken
                    raise
                continue
            names.append(info.name)
    return names


def error_classes() -> set[type]:
    found, todo = set(), [errors.EpisodeLakeError]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return found | {errors.EpisodeLakeError}


def unlisted(classes: set[type]) -> list[str]:
    """Public product error classes without a status of their own in `STATUS`."""
    return sorted(f"{c.__module__}.{c.__qualname__}" for c in classes
                  if c.__module__.startswith("episodelake.") and not c.__name__.startswith("_")
                  and c not in STATUS)


def test_device_errors_and_storage_errors_are_siblings():
    for device in (errors.DeviceError, errors.DeviceUnavailable, errors.EnvironmentLost, errors.ActionFailed):
        assert issubclass(device, errors.EpisodeLakeError) and not issubclass(device, errors.LakeError)
    for storage in (errors.SqlRefused, errors.LakeCorrupt):
        assert issubclass(storage, errors.LakeError) and not issubclass(storage, errors.DeviceError)
    assert not issubclass(errors.InvalidInput, errors.LakeError)
    with pytest.raises(errors.EpisodeLakeError):
        try:
            raise errors.DeviceUnavailable("no device")
        except errors.LakeError:  # what handles the lake's errors lets a lost phone through
            pytest.fail("a DeviceError was caught as a LakeError")


def test_every_error_class_of_the_product_has_a_status():
    modules = product_modules()
    assert len(modules) > 50 and "episodelake.collectors.envs.remote" in modules
    classes = error_classes()
    assert {errors.DeviceUnavailable, errors.SqlRefused, errors.InvalidInput} <= classes
    assert unlisted(classes) == []

    class NewKind(errors.InvalidInput):  # a class added without deciding its status is caught
        pass

    NewKind.__module__ = "episodelake.lake.someday"
    assert unlisted(error_classes()) == ["episodelake.lake.someday." + NewKind.__qualname__]
    assert status_of(NewKind("x")) == STATUS[errors.InvalidInput]  # meanwhile its nearest base answers


def test_no_status_lives_on_the_error_classes():
    for cls in error_classes():
        assert "status" not in vars(cls), f"{cls.__qualname__} carries an HTTP status; STATUS in api/errors.py has them"


def test_the_command_line_prints_one_line_for_a_device_error(capsys):
    from episodelake.api.cli import report_error

    code = report_error(errors.DeviceUnavailable("no device attached:\nplug one in and run `adb devices`"), "collect")
    err = capsys.readouterr().err
    assert code == 1
    assert err == "elake collect: no device attached: plug one in and run `adb devices`\n"


# -- the builtins the family inherits ----------------------------------------------------------
def test_invalid_input_is_a_value_error_and_not_found_a_lookup_error():
    from episodelake.trainer.config import ConfigError

    with pytest.raises(ValueError) as caught:  # a caller may catch either way
        raise errors.InvalidInput("reward: must be a finite number, not nan")
    assert caught.value.kind == "InvalidInput"
    try:
        raise errors.NotFound("no episode 'ep-1'")
    except LookupError as exc:
        assert exc.kind == "NotFound" and str(exc) == "no episode 'ep-1'"
    assert issubclass(ConfigError, ValueError)  # subclasses inherit it too
    # a missing episode is not a missing key of a mapping: `except KeyError` (dict lookups,
    # `Mapping.get`) does not catch it
    assert not issubclass(errors.NotFound, KeyError)
    # statuses still come from the product's classes, not the builtins
    assert status_of(errors.InvalidInput("x")) == 422 and status_of(errors.NotFound("x")) == 404
    assert status_of(ConfigError("x")) == STATUS[ConfigError]


def test_no_product_error_is_an_os_error():
    """Code around file and network I/O catches OSError to retry or to describe a failed
    call (`store_errors`, the writer's commit loop): a product error must never look like one,
    so not even `StoreSilent` is a `TimeoutError`."""
    product_modules()
    assert [c.__qualname__ for c in error_classes() if issubclass(c, OSError)] == []


def test_a_check_a_model_raises_comes_out_as_it_was_raised():
    """pydantic reports a ValueError a validator raises inside a ValidationError; since
    InvalidInput is one, `SpecModel` (and `Settings`) hand the check's own error back: its
    class and its message, as before InvalidInput was a ValueError."""
    from episodelake.api.settings import Settings
    from episodelake.trainer.config import ConfigError, TrainConfig

    with pytest.raises(ConfigError) as caught:
        TrainConfig(group_size=1)
    assert str(caught.value).startswith("group_size: 1 leaves every episode without a baseline")
    with pytest.raises(errors.InvalidInput, match=r"^binding 0\.0\.0\.0 exposes the lake") as refused:
        Settings(lake="unused", host="0.0.0.0")
    assert type(refused.value) is errors.InvalidInput
