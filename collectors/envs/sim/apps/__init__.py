"""The apps of the simulated phone. Each module exposes ``PACKAGE``, ``build(ui)`` (lay out
the screen of ``ui.route``) and, when it has dialogs, ``dialog(ui, dialog)``."""

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
