"""Trainable policies: `tiny` (a small CPU network) and `vlm` (a Hugging Face image-text model).

Both implement `base.TrainablePolicy`; `episodelake.trainer.loop.build_policy` picks one.
"""
