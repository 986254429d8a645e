"""A simulated Android phone for rollouts, demos and tests, with no device and no GPU.

Entry points (import them from their modules; this package imports nothing itself, so a
job that needs only the task registry does not load the renderer):

- :mod:`.phone`: ``Phone(seed)`` with ``step(arguments) -> StepOutcome``, ``screenshot()``,
  ``image()``, ``ui_tree()``, ``screen_id()``, ``snapshot()``;
- :mod:`.tasks`: ``all_tasks()``, ``get_task(id)``, ``sample_tasks(n, seed)``,
  ``task_for_goal(goal)``; each ``Task`` has ``id``, ``name``, ``goal``, ``difficulty``,
  ``setup(phone)``, ``check(phone)``, ``solution(phone)``; one module of templates per app;
- :mod:`.judge`: ``RuleJudge().judge(goal, before, action, after) -> (score, reason)``.

Its agent, the scripted demo policy (``DemoPolicy(task, NoiseConfig.demo(), seed)``, answering
in MAI-UI text), is :mod:`episodelake.collectors.agents.oracle`. Anchor keys for its screens
come from :mod:`episodelake.lake.derive.anchor`, shared with every other device.

Modules below those: ``state`` (plain data), ``catalog`` (the fixed world), ``widgets``
(layout), ``apps/`` (one module per app), ``overlays`` (system UI), ``render`` and ``icons``
(pixels), ``a11y`` (the tree), ``actions`` (checking actions), ``navigation`` (oracle steps).
"""
