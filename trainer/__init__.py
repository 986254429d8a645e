"""Online RL over the lake: GiGPO/GRPO advantages as SQL, trainable policies, the loop."""
