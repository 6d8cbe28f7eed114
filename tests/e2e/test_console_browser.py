"""The console in a real browser (Debian's chromium through chromedriver, driven by selenium)
against the real stack: broker, sim cloud, device agents, runtime, console. A workflow appears
and completes live, a cancel from the page and one from the PUI land, a typed utterance gets
its snapshot, and without the token nothing is shown. Screenshots of each view are saved in
$CONSOLE_ARTIFACTS (default .artifacts/console)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sim.cloud import SimCloud
from sim.devices import Behavior, DeviceAgents
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory
from tests.e2e.consoles import running_console
from tests.e2e.test_console import EVENTS, plan

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
ARTIFACTS = Path(
    os.environ.get("CONSOLE_ARTIFACTS", Path(__file__).parents[2] / ".artifacts" / "console")
)
LIVE_S = 3.0  # the page must change this soon after the event (the issue asks for 1 s; slack
# for a loaded 2-core machine: the event stream's own delay is checked in test_console.py)


@pytest.fixture
def browser() -> Iterator[Any]:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("browser tests: selenium is not installed (pip install -e '.[dev]')")
    if CHROMIUM is None or DRIVER is None:
        pytest.skip("browser tests: no chromium/chromedriver (./bootstrap.sh test installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,900"):
        options.add_argument(flag)
    options.add_argument("--disable-dev-shm-usage")
    driver = webdriver.Chrome(options=options, service=Service(executable_path=DRIVER))
    yield driver
    driver.quit()


def _wait(driver: Any, condition: Any, timeout_s: float = 10.0) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout_s, poll_frequency=0.05).until(condition)


def _row_status(driver: Any, workflow_id: str) -> str:
    """Read in one script: the page redraws its rows on every change (no stale elements)."""
    found = driver.execute_script(
        "const r = document.querySelector(`#workflows tr[data-workflow-id='${arguments[0]}']`);"
        "return r ? r.querySelector('td.status').textContent : '';",
        workflow_id,
    )
    return str(found)


def _texts(driver: Any, selector: str) -> list[str]:
    found = driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map((e) => e.textContent);",
        selector,
    )
    return [str(t) for t in found]


def _shot(driver: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def _view(driver: Any, name: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, f'nav button[data-view="{name}"]').click()


def test_the_page_follows_workflows_cancels_and_snapshots_live(
    browser: Any,  # first: without a browser, skip before the stack starts
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    devices: DeviceAgents,
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    # a heartbeat every second (health shows), a standing consent grant (the register shows)
    fast_beat = {"WATCHDOG_USEC": "2000000"}
    runtime = runtime_factory(env=fast_beat, privacy={"consented_categories": ["health"]})
    with running_console(runtime.config) as console:
        browser.get(console.base)  # without the token: refused, nothing shown
        assert "token is needed" in browser.page_source and "workflows" not in browser.page_source
        browser.get(console.url)
        _wait(browser, lambda d: d.find_element(By.ID, "live").text == "live")
        browser.execute_script("window.__sameLoad = true")  # gone if the page reloads

        plan(cloud, "wf-b1")
        probe.turn("t-b1", "안방으로 가서 청정해줘")
        probe.wait_for(EVENTS, lambda b: b.get("workflow_id") == "wf-b1")
        _wait(browser, lambda d: _row_status(d, "wf-b1") != "", LIVE_S)
        probe.wait_for(EVENTS, lambda b: b.get("status") == "WORKFLOW_COMPLETED")
        _wait(browser, lambda d: _row_status(d, "wf-b1") == "completed", LIVE_S)
        timeline = " ".join(_texts(browser, "#timeline td"))
        _wait(browser, lambda d: "WORKFLOW_COMPLETED" in " ".join(_texts(d, "#timeline td")))
        timeline = " ".join(_texts(browser, "#timeline td"))
        assert "안방" in timeline, timeline
        phases = _texts(browser, "#timeline td.phase")
        assert phases[0] == "admission" and phases[-1] == "terminal"
        _shot(browser, "workflows")

        devices.behaviors["mobility.move_to_room"] = Behavior("hold")
        plan(cloud, "wf-b2")
        probe.turn("t-b2", "안방으로 가서 청정해줘")
        _wait(browser, lambda d: _row_status(d, "wf-b2") == "running", LIVE_S)
        button = 'button.cancel[data-workflow-id="wf-b2"]'  # one step: rows are redrawn
        browser.execute_script(f"document.querySelector('{button}').click()")
        _wait(browser, lambda d: _row_status(d, "wf-b2") == "cancelled", LIVE_S + 5)
        devices.wait_for(lambda d: any(c["workflow_id"] == "wf-b2" for c in d.cancels))
        assert {"task_id": "wf-b2:step_move", "workflow_id": "wf-b2", "reason": "user"} in (
            devices.cancels
        )

        plan(cloud, "wf-b3")
        probe.turn("t-b3", "안방으로 가서 청정해줘")
        _wait(browser, lambda d: _row_status(d, "wf-b3") == "running", LIVE_S)
        probe.publish(f"{ROOT}/pui/event", {"event_id": "pui-b3", "kind": "cancel"})
        _wait(browser, lambda d: _row_status(d, "wf-b3") == "cancelled", LIVE_S)
        assert browser.execute_script("return window.__sameLoad") is True

        _view(browser, "memory")
        box = browser.find_element(By.ID, "utterance")
        box.send_keys("거실 청정해줘", Keys.ENTER)
        _wait(browser, lambda d: "거실 청정해줘" in d.find_element(By.ID, "snapshot-meta").text)
        before = browser.find_element(By.ID, "snapshot").text
        assert "안방으로 가서 청정해줘" in before
        devices.behaviors["mobility.move_to_room"] = Behavior()
        probe.turn("t-b4", "오늘 날씨 어때")
        browser.find_element(By.CSS_SELECTOR, "#snapshot-form button").click()
        _wait(browser, lambda d: "오늘 날씨 어때" in d.find_element(By.ID, "snapshot").text)
        _shot(browser, "memory")
        hostile = '<img src=x onerror="window.__xss=1">안방'  # shown as text, never run
        box = browser.find_element(By.ID, "utterance")
        box.clear()
        box.send_keys(hostile, Keys.ENTER)
        _wait(browser, lambda d: hostile in d.find_element(By.ID, "snapshot-meta").text)
        assert browser.execute_script("return window.__xss === undefined") is True
        assert not browser.find_elements(By.CSS_SELECTOR, "main img")
        for name in ("sync", "health"):
            _view(browser, name)
            _wait(browser, lambda d, n=name: d.find_element(By.ID, n).text != "")
            _shot(browser, name)
        assert "running" in browser.find_element(By.ID, "health").text
        assert "category:health" in browser.find_element(By.ID, "consent").text
        runtime.terminate()  # the page says so, live; the console goes on serving
        _wait(browser, lambda d: "not running" in d.find_element(By.ID, "service").text, LIVE_S)
