"""The console until its first data arrives (issue 35 item 6): the page says it is loading —
never empty tables, `none` or `service: unknown`, which a screenshot taken at load read as
"no workflows" — and, when the data cannot be read, that it is not loaded and why. In the real
browser (chromium through chromedriver) against the real runtime and console; the network is
slowed through the DevTools protocol so that the moment before the data is long enough to see."""

from __future__ import annotations

from typing import Any

from sim.probe import MqttProbe
from tests.conftest import RuntimeFactory
from tests.e2e.consoles import running_console
from tests.e2e.test_console_browser import _shot, _texts, _wait, browser  # noqa: F401

LATENCY_MS = 3000  # each request waits this long: the page is up, its data is not yet


def _state(driver: Any) -> str:
    return str(driver.execute_script("return document.body.dataset.state || ''"))


def test_the_page_says_loading_until_its_first_data(
    browser: Any,  # noqa: F811  (the fixture; first: without a browser, skip before the stack)
    runtime_factory: RuntimeFactory,
    probe: MqttProbe,
) -> None:
    from selenium.webdriver.common.by import By

    runtime = runtime_factory()
    probe.turn("t-1", "안녕")
    with running_console(runtime.config) as console:
        browser.execute_cdp_cmd("Network.enable", {})
        slow = {"offline": False, "latency": LATENCY_MS}
        unbounded = {"downloadThroughput": -1, "uploadThroughput": -1}
        browser.execute_cdp_cmd("Network.emulateNetworkConditions", {**slow, **unbounded})
        browser.get(console.url)  # returns at the page's load: its first data is still on the way
        assert _state(browser) == "loading"
        shown = browser.find_element(By.TAG_NAME, "body").text
        _shot(browser, "loading")
        assert "loading the robot's state" in browser.find_element(By.ID, "loading").text
        assert browser.find_element(By.ID, "service").text == "service: loading…"
        assert _texts(browser, "#workflows tbody td") == ["loading…"], shown
        assert "unknown" not in shown and "none" not in shown, shown
        assert browser.find_element(By.TAG_NAME, "main").get_attribute("aria-busy") == "true"

        _wait(browser, lambda d: _state(d) == "loaded", 4 * LATENCY_MS / 1000 + 10)
        assert not browser.find_element(By.ID, "loading").is_displayed()
        assert "service: running" in browser.find_element(By.ID, "service").text
        assert "loading…" not in browser.find_element(By.TAG_NAME, "body").text
        assert browser.find_element(By.TAG_NAME, "main").get_attribute("aria-busy") is None


def test_a_page_whose_data_cannot_be_read_says_not_loaded(
    browser: Any,  # noqa: F811
    runtime_factory: RuntimeFactory,
) -> None:
    from selenium.webdriver.common.by import By

    runtime = runtime_factory()
    with running_console(runtime.config) as console:
        browser.execute_cdp_cmd("Network.enable", {})
        browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/api/overview*"]})
        browser.get(console.url)
        _wait(browser, lambda d: _state(d) == "failed")
        assert "not loaded yet (retrying)" in browser.find_element(By.ID, "loading").text
        assert browser.find_element(By.ID, "service").text == "service: not loaded"
        assert _texts(browser, "#workflows tbody td") == ["not loaded"]
        assert "none" not in browser.find_element(By.TAG_NAME, "main").text
        browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})  # the stream retries
        _wait(browser, lambda d: _state(d) == "loaded", 30)
        assert "service: running" in browser.find_element(By.ID, "service").text
