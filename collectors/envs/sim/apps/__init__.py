"""The apps of the simulated phone. Each module exposes ``PACKAGE``, ``SCREENS`` (each
route screen name with the function that lays that screen out) and, when it has dialogs,
``dialog(ui, dialog)``. The launcher, which has no route, exposes ``build(ui)``.

An app's module is named by its id in ``state.APPS``, the one list of the phone's apps."""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

from episodelake.collectors.envs.sim.apps import launcher
from episodelake.collectors.envs.sim.state import APPS

APP_MODULES: dict[str, ModuleType] = {app: import_module(f"{__name__}.{app}") for app in APPS}

__all__ = ["APP_MODULES", "launcher"]
