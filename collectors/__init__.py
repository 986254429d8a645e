"""Everything that produces episodes, in rooms that import downward only:

- ``jobs/``, ``clawgui/``: batches of episodes (collection, rollouts, re-runs, judge
  back-fill) and the ClawGUI-RL drop-in and folder importer;
- ``agents/``: what acts (a model behind a server, random, the simulated phone's oracle) and
  the VLM step judge's client;
- ``loop.py``: the one episode loop (`run_episode`) and the `Agent` interface;
- ``envs/``: where episodes are played (the `Device` interface, the simulated phone, adb,
  environment servers);
- ``record/``: what a step becomes in the lake (the `Recorder`, image checks, anchor keys,
  response parsing).

Below them all is the lake (`episodelake.lake`); nothing here imports the trainer or the API.
`tests/test_architecture.py` checks the order.
"""
