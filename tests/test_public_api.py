"""`from episodelake import Recorder, Lake, sft_dataset`: the public names, their one list
(`episodelake.HOMES`), the manual's API page that documents each, and the `py.typed` marker."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import episodelake
from tests.factories import child_env

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", sorted(episodelake.HOMES))
def test_each_public_name_is_the_object_at_its_home(name):
    home = importlib.import_module(episodelake.HOMES[name])
    assert getattr(episodelake, name) is getattr(home, name)


def test_the_three_names_users_are_taught_import_together():
    from episodelake import Lake, Recorder, sft_dataset

    assert Recorder.__name__ == "Recorder" and Lake.__name__ == "Lake" and callable(sft_dataset)
    assert set(episodelake.__all__) == set(episodelake.HOMES)
    assert {"Recorder", "Lake", "sft_dataset"} <= set(dir(episodelake))


def test_an_unknown_name_is_an_attribute_error_listing_the_public_names():
    with pytest.raises(AttributeError, match=r"no attribute 'Recoder'.*Recorder"):
        episodelake.Recoder  # noqa: B018
    with pytest.raises(ImportError):
        exec("from episodelake import Recoder", {})


def test_importing_the_package_or_the_lake_loads_no_torch_and_no_trainer():
    probe = ("import sys, episodelake, episodelake.lake; from episodelake import Lake, Recorder; "
             "print(sorted(m for m in ('torch', 'episodelake.trainer') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                         env=child_env(), cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_api_page_documents_every_public_name_and_nothing_else():
    page = (ROOT / "docs" / "api.md").read_text()
    documented = re.findall(r"^::: episodelake\.(\w+)$", page, flags=re.M)
    assert sorted(documented) == sorted(episodelake.HOMES)


def test_the_package_ships_py_typed():
    assert (ROOT / "episodelake" / "py.typed").is_file()
    setup = (ROOT / "setup.py").read_text()
    assert '"episodelake": ["py.typed"]' in setup


def test_type_checkers_see_every_public_name_at_its_home():
    """The `TYPE_CHECKING` imports are what mypy reads for `from episodelake import X`: each
    public name is imported there, from the module `HOMES` names."""
    import ast

    tree = ast.parse((ROOT / "episodelake" / "__init__.py").read_text())
    guarded = next(node for node in tree.body if isinstance(node, ast.If)
                   and getattr(node.test, "id", None) == "TYPE_CHECKING")
    seen = {alias.name: node.module for node in guarded.body if isinstance(node, ast.ImportFrom)
            for alias in node.names}
    assert seen == episodelake.HOMES
