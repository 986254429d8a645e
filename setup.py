"""Maps the product's top-level folders onto one package name, `episodelake`.

`lake/` installs as `episodelake.lake`, `collectors/envs/sim/` as
`episodelake.collectors.envs.sim`, and so on; `episodelake/` holds only the package itself: the
names users import from it (`from episodelake import Recorder, Lake, sft_dataset`) and the
`py.typed` marker that tells type checkers the whole package is annotated. Everything else
lives in pyproject.toml.
"""

from setuptools import find_packages, setup

ROOTS = ("lake", "collectors", "trainer", "api")

packages = ["episodelake"]
for root in ROOTS:
    packages.append(f"episodelake.{root}")
    packages += [f"episodelake.{root}.{sub}" for sub in find_packages(root)]

setup(
    packages=packages,
    package_dir={"episodelake": "episodelake", **{f"episodelake.{root}": root for root in ROOTS}},
    package_data={"episodelake": ["py.typed"], "episodelake.api": ["static/**/*", "docs/*"],
                  "episodelake.trainer": ["configs/*.json"]},
)
