"""What records: the `Recorder` (``recorder``), through which every writer of episodes goes —
the episode loop, the ClawGUI drop-in and its folder importer. The checks and derived columns
it applies to a step (image checks, anchor keys, perceptual hashes) live in `lake/derive`."""
