"""One error family: device errors are not storage errors, every class the product defines has
an HTTP status in the API's one table (tests/api/test_errors_api.py: the API answers each with
it), and the command line prints any of them as one line."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

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


# -- no new builtin raise in product code ------------------------------------------------------
ROOT = Path(__file__).resolve().parents[3]
PRODUCT = ("lake", "collectors", "trainer", "api")
BUILTINS = {"ValueError", "KeyError", "LookupError", "TypeError"}

#: The builtin raises product code keeps, by `file:function`: invariants a caller cannot meet
#: unless the product itself has a bug, and protocols that require the builtin. Anything a
#: caller (user code, the command line, the API, a spec) can meet raises a family class instead.
ALLOWED = {
    "lake/storage/tables.py:commit.merge":
        "`kind` is one of the writer's own (append, insert_missing, upsert); another is a bug in the product",
    "lake/storage/tables.py:_literal":
        "key values come from the schema's key columns (str or int); another type is a bug",
    "lake/storage/rows.py:_arrow_field":
        "a row model declared wrongly, raised when its module loads (a TypeError of a class definition)",
    "lake/storage/rows.py:arrow_type":
        "a row model's annotation with no Arrow type, raised when its module loads",
    "lake/storage/schema.py:pick":
        "a reader's projection checked when its module loads: a renamed column is a bug found at import",
    "lake/curation/versions.py:versions_of":
        "the table names are literals of the product's own queries",
    "lake/vocab/families/__init__.py:parse_response":
        "TypeError for a `text` that is not a str (bad model output never raises; a wrong type "
        "is the calling code's bug, as for str's own methods)",
    "collectors/envs/jsonaction.py:to_json_action":
        "after the validity check every action type maps: reached only by a type added to the "
        "vocabulary without its JSONAction",
    "trainer/policies/vlm.py:_one_text":
        "TypeError: transformers returned a type its own contract excludes",
    "trainer/advantages.py:_relation":
        "TypeError for steps=/episodes= that are neither a table name nor a pyarrow.Table",
    "api/settings.py:Settings._known_derivations":
        "pydantic's idiom: a ValueError in a field validator is reported naming the field, and "
        "Settings.from_env raises that as InvalidInput",
    "api/cli/model_options.py:with_parameters.decorate":
        "a command whose own parameters clash with shared options, raised when the CLI module loads",
}


def builtin_raises() -> dict[str, list[int]]:
    """`file:function` -> line numbers of each `raise ValueError/KeyError/LookupError/TypeError`."""
    found: dict[str, list[int]] = {}

    class Visitor(ast.NodeVisitor):
        def __init__(self, path: str):
            self.path, self.scope = path, []

        def _scoped(self, node: ast.AST, name: str) -> None:
            self.scope.append(name)
            self.generic_visit(node)
            self.scope.pop()

        def visit_ClassDef(self, node: ast.ClassDef) -> None:
            self._scoped(node, node.name)

        def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
            self._scoped(node, node.name)

        def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
            self._scoped(node, node.name)

        def visit_Raise(self, node: ast.Raise) -> None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id in BUILTINS:
                key = f"{self.path}:{'.'.join(self.scope) or '<module>'}"
                found.setdefault(key, []).append(node.lineno)

    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            Visitor(relative).visit(ast.parse(path.read_text(encoding="utf-8"), relative))
    return found


def test_product_code_raises_the_family_not_a_bare_builtin():
    found = builtin_raises()
    new = {key: lines for key, lines in found.items() if key not in ALLOWED}
    assert not new, (
        "raise a class of the product's error family (lake/storage/errors.py: InvalidInput for a "
        "caller's bad argument or config, NotFound for a missing thing, ...), not a builtin; "
        "InvalidInput is a ValueError and NotFound a LookupError, so callers catching those still "
        f"do. Only an invariant no caller can meet belongs in ALLOWED, with its reason: {new}")
    stale = sorted(ALLOWED.keys() - found.keys())
    assert not stale, f"these no longer raise a builtin: take them out of ALLOWED: {stale}"
