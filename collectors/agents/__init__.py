"""What acts in an episode. Every agent answers ``act(Observation) -> Reply``
(:class:`episodelake.collectors.loop.Agent`): ``model`` (a model behind an OpenAI-compatible
server, through ``model_client``), ``random``, ``oracle`` (the simulated phone's scripted demo
policy, which reads the phone through its device). ``judge`` is the VLM step judge's client.
The trainer's policies are agents too (`episodelake.trainer.policies`)."""
