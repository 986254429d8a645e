"""Jobs over many episodes: ``batch`` (`run_batch`: the episode loop on several workers, and
the device and agent specs they open), ``rollout`` (N tasks x G rollouts on the simulated
phone), ``rerun`` (regression re-runs of a curated set), ``backfill`` (step rewards from the
VLM judge for stored episodes) and ``tasks`` (task files and episode groups)."""
