"""`a2a-edge reload` of a config file that does not load (a `privacy.lexicon_file` that is not
there) is a refused reload (docs/cli.md): `"ok": false` with the config error under `--json`,
exit 1, and the service keeps running with its config. On main the CLI stopped at loading the
file: exit 2 with one line on stderr and no JSON, even with `--json`."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import RuntimeFactory
from tests.e2e.test_cli_answers import a2a_edge, answer_of


def test_a_reload_of_a_config_that_does_not_load_is_refused_with_ok_false(
    tmp_path: Path, runtime_factory: RuntimeFactory
) -> None:
    runtime = runtime_factory()
    config = runtime.config
    missing = tmp_path / "no-such-lexicon.json"
    config.write_text(config.read_text() + f'\n[privacy]\nlexicon_file = "{missing}"\n')
    done = a2a_edge("reload", "--config", str(config), "--json")
    assert done.returncode == 1, (done.stdout, done.stderr)
    answer = answer_of(done)
    assert answer["ok"] is False
    assert (
        answer["error"].startswith("config error: ") and "privacy.lexicon_file" in answer["error"]
    )
    plain = a2a_edge("reload", "--config", str(config))
    assert plain.returncode == 1 and plain.stdout == ""
    assert plain.stderr.startswith("a2a-edge: config error: ")
    assert runtime.proc is not None and runtime.proc.poll() is None  # still serving
