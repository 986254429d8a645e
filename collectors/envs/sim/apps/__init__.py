"""The apps of the simulated phone. Each module exposes ``PACKAGE``, ``SCREENS`` (each
route screen name with the function that lays that screen out) and, when it has dialogs,
``dialog(ui, dialog)``. The launcher, which has no route, exposes ``build(ui)``."""

from __future__ import annotations

from types import ModuleType

from episodelake.collectors.envs.sim.apps import (
    clock,
    contacts,
    launcher,
    messages,
    notes,
    phone,
    settings,
    shop,
)

APP_MODULES: dict[str, ModuleType] = {
    "settings": settings,
    "clock": clock,
    "notes": notes,
    "contacts": contacts,
    "phone": phone,
    "messages": messages,
    "shop": shop,
}

__all__ = ["APP_MODULES", "launcher"]
