# EpisodeLake tasks. `just` alone runs the tests and the linter.

set shell := ["bash", "-euo", "pipefail", "-c"]

venv := ".venv"
py := venv + "/bin/python"
lake := env_var_or_default("ELAKE_LAKE", "elake-data")
port := env_var_or_default("ELAKE_PORT", "8799")

import? 'web/web.just'
import? 'trainer/train-gpu.just'

default: test lint

# Create .venv and install the project (CPU torch first, so nothing pulls a CUDA build).
setup:
    test -x {{py}} || python3 -m venv {{venv}}
    {{py}} -m pip install -q --upgrade pip
    {{py}} -m pip install -q -c constraints.txt torch==2.13.0
    {{py}} -m pip install -q -c constraints.txt -e '.[dev,ray]' transformers
    {{py}} -c "import deepspeed" 2>/dev/null || {{py}} -m pip install -q -c constraints.txt --no-build-isolation deepspeed || echo "deepspeed did not install: the trainer falls back to plain torch"

# Install, build the web app, create a demo lake if there is none, and serve it; the server
# reads the screenshots' text (OCR, for search and redaction) in the background meanwhile.
up: setup web
    if [ ! -d "{{lake}}/steps.lance" ]; then {{venv}}/bin/elake --lake {{lake}} demo; fi
    @echo "serving {{lake}} on http://127.0.0.1:{{port}}"
    {{venv}}/bin/elake --lake {{lake}} serve --port {{port}} --background-enrich phash,ocr

# Run the whole test suite (real Lance, DuckDB, FastAPI and Chromium; nothing mocked).
test *args: setup web
    {{py}} -m pytest -q {{args}}

# Retake the README's pictures (docs/screenshots/*.png); other test runs leave them alone.
screenshots: setup web
    ELAKE_SCREENSHOTS=1 {{py}} -m pytest -q tests/browser/test_daily_use.py -k "readme_screenshot_of_the_replay or overview_greets_the_user"

# The manual (docs/, mkdocs.yml) into site/; strict, so a broken link or a page missing from
# the nav fails here as it does in tests/test_docs.py.
docs: setup
    NO_MKDOCS_2_WARNING=1 {{venv}}/bin/mkdocs build --strict --site-dir site

# Benchmarks: each prints ratios against a baseline measured in the same run.
# `just bench` runs them all (about an hour on 2 cores); `just bench ingest query` runs those.
bench *names: setup web
    names="{{names}}"; for b in ${names:-$(ls bench/bench_*.py | sed 's|bench/bench_||; s|\.py$||')}; do \
        echo "== bench_$b"; {{py}} "bench/bench_$b.py"; done

# ruff, the import layers (pyproject.toml [tool.importlinter]) and mypy over the packages
# (pyproject.toml [tool.mypy]; run through tests/test_types.py, which names each source file
# as its installed module, since mypy cannot follow the editable install's import hook).
lint:
    {{venv}}/bin/ruff check lake collectors trainer api tests bench
    {{py}} -m tests.package_tree "$PWD/{{venv}}/bin/lint-imports"
    {{py}} tests/test_types.py
