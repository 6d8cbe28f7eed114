"""README "Run it yourself": what its watcher prints first. The retained topics of
docs/contract.md §2 come first, in an order the broker chooses; on main the README said the
retained `runtime/status` "comes first", and the watcher printed `device/context` and the
agents' statuses before it."""

from __future__ import annotations

import re

from tests.docs.contract_doc import CONTRACT, ROOT


def retained_topics() -> set[str]:
    """The topics the contract's table marks retained, as `P/…`."""
    out = set()
    for line in CONTRACT.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 5 and cells[1].startswith("`P/") and cells[4] == "yes":
            out.add(cells[1].strip("`"))
    return out


def test_the_watcher_is_said_to_print_every_retained_topic_first_in_no_fixed_order() -> None:
    readme = ROOT.joinpath("README.md").read_text(encoding="utf-8")
    start = readme.index("Watch everything the robot says and hears")
    said = " ".join(readme[start : readme.index("# run: watch", start)].split())
    assert "`runtime/status` comes first" not in said
    assert "in the broker's order" in said
    retained = retained_topics()
    assert retained == {"P/agent/<capability_id>/status", "P/device/context", "P/runtime/status"}
    for topic in ("device/context", "runtime/status"):
        assert f"`{topic}`" in said, topic
    assert re.search(r"`agent/<capability>/status`", said)
