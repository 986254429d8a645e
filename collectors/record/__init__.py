"""What a step becomes in the lake: the `Recorder` (``recorder``), image checks (``images``),
anchor keys (``anchor``) and response parsing (``actions/``, one module per model format).
Everything that writes episodes goes through here: the episode loop, the ClawGUI drop-in and
its folder importer."""
