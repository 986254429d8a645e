"""Launcher tasks: open an app."""

from __future__ import annotations

from episodelake.collectors.envs.sim import navigation as nav
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.state import APPS, PhoneState
from episodelake.collectors.envs.sim.tasks.base import Params, Template


def _open_app_check(state: PhoneState, params: Params) -> bool:
    return state.foreground == params["app"]


def _open_app_solve(phone: Phone, params: Params) -> nav.Action | None:
    return nav.dismiss(phone) or nav.open_app(phone, params["app"])


TEMPLATES = [
    Template("open_app", "Open the {app} app.", "easy", _open_app_check, _open_app_solve,
             tuple({"app": app} for app in APPS)),
]
