"""ClawGUI-RL compatibility: the drop-in recording functions (:mod:`.dropin`; this package is
their import path, so switching is one import) and the episode-folder importer
(:mod:`.importer`, `elake import|watch clawgui`). The folder writer lives with the exports
(:mod:`episodelake.lake.export.clawgui`, `elake export clawgui`)."""

from episodelake.collectors.clawgui.dropin import save_episode_to_json, update_episode_result

__all__ = ["save_episode_to_json", "update_episode_result"]
