"""docs/device-agents.md §8 says what installing the agent helper pulls: every dependency in
pyproject.toml is named, and the one it imports (`a2a_agent` imports paho-mqtt and the standard
library only, checked from its sources). On main the guide said the helper "needs only
paho-mqtt" while its wheel pulled every dependency of the runtime."""

from __future__ import annotations

import ast
import re
import sys
import tomllib

from tests.docs.contract_doc import ROOT


def section_8() -> str:
    text = (ROOT / "docs" / "device-agents.md").read_text(encoding="utf-8")
    start = text.index("## 8. ")
    return " ".join(text[start : text.index("\n## 9. ", start)].split())


def test_the_guide_names_every_dependency_the_wheel_pulls() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [re.split(r"[<>=!~ \[]", dep, maxsplit=1)[0] for dep in project["dependencies"]]
    said = section_8()
    assert "needs only paho-mqtt" not in said
    missing = [name for name in names if name not in said]
    assert not missing, f"device-agents.md §8 does not name {missing}"
    assert "--no-deps dist/a2a_edge-*.whl 'paho-mqtt" in said


def test_the_helper_imports_paho_and_the_standard_library_only() -> None:
    outside = set()
    for path in (ROOT / "a2a_agent").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                tops = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                tops = [node.module.split(".")[0]]
            else:
                continue
            outside |= {t for t in tops if t not in sys.stdlib_module_names}
    assert outside == {"paho", "a2a_agent"}, outside
