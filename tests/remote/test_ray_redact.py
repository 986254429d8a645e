"""A redacting export on Ray masks in its tasks exactly what one process masks."""

from __future__ import annotations

import pytest

from episodelake.api.cli import main
from episodelake.lake.curation.redact import RedactRules
from episodelake.lake.export import ExportSpec, run_export
from tests.factories import needs_ray
from tests.lake.curation.test_redact import NAMES, record_screens, store_ui_text
from tests.lake.export.test_export import tree
from tests.remote.ray_cluster import ray_cluster  # noqa: F401

pytestmark = [needs_ray, pytest.mark.slow, pytest.mark.usefixtures("ray_cluster"),
              pytest.mark.filterwarnings("ignore:lance is not fork-safe")]


def test_a_redacting_export_on_ray_writes_the_same_files(lake, tmp_path):
    phones = record_screens(lake, ["contact_alice", "in_call", "notes", "settings"])
    store_ui_text(lake, "ep-sim", phones)
    rules = tmp_path / "pii.json"
    rules.write_text(RedactRules(names=NAMES).model_dump_json())
    options = {"format": "llamafactory", "val_fraction": 0.0, "relative_paths": True, "redact": True}
    here = run_export(lake, ExportSpec(out=tmp_path / "here", redact_config=rules, **options))
    argv = ["--lake", str(lake.path), "export", "sft", "--format", "llamafactory", "--out", str(tmp_path / "ray"),
            "--val-fraction", "0", "--relative-paths", "--redact", "--redact-config", str(rules), "--ray"]
    assert main(argv) == 0
    assert tree(tmp_path / "ray") == tree(tmp_path / "here")
    assert here.manifest["redaction"]["regions"] == {"card": 1, "email": 1, "name": 2, "phone": 2}
