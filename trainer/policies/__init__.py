"""Trainable policies: `tiny` (a small CPU network on pixels), `screen` (a small CPU network
that reads the screen's elements; both extend `small.SmallPolicy`) and `vlm` (a Hugging Face
image-text model).

All implement `base.TrainablePolicy`; `episodelake.trainer.loop.build_policy` picks one.
"""
