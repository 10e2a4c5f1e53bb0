"""The planner page in headless Chromium against a real server: the form filled, memory,
latency-vs-load, simulation and sizing run, every chart holding the answer's points, a 422 shown
at the field it names, the state in a link that reproduces the page, and not one request
leaving the loopback address."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from servesize.db.connection import create_db_engine, make_sessionmaker, transaction
from servesize.db.repository import ApiKeyRepository
from servesize.security import Scope

# Optional: where to also save the full-page screenshot (docs/planner.png is made this way).
SCREENSHOT_DIR = os.environ.get("PLANNER_SCREENSHOT_DIR")
MODELS = Path(__file__).resolve().parents[2] / "servesize" / "data" / "models"
WAIT_S = 240  # bounds a page that never answers; nothing is timed against it


def _wait(driver: WebDriver, condition: Callable[[WebDriver], Any]) -> Any:
    return WebDriverWait(driver, WAIT_S, poll_frequency=0.1).until(condition)


def _open(driver: WebDriver, url: str) -> None:
    driver.get(url)
    _wait(driver, lambda d: d.execute_script("return document.body.dataset.ready") == "true")


def _fill(driver: WebDriver, values: dict[str, str]) -> None:
    for name, value in values.items():
        field = driver.find_element(By.ID, f"f-{name}")
        if field.tag_name == "select":
            Select(field).select_by_value(value)
        else:
            field.clear()
            field.send_keys(value)


def _run(driver: WebDriver, kind: str) -> None:
    driver.find_element(By.ID, f"run-{kind}").click()
    _wait(
        driver,
        lambda d: d.execute_script(f"return !document.querySelector('.spinner[data-kind={kind}]')"),
    )
    box = driver.find_element(By.CSS_SELECTOR, f'[data-status="{kind}"]')
    problems = [p.text for p in box.find_elements(By.CSS_SELECTOR, ".problem")]
    assert not problems, problems


def _table(driver: WebDriver, name: str) -> dict[str, Any]:
    table: dict[str, Any] = driver.execute_script(f"return window.__charts[{json.dumps(name)}]")
    return table


def _points(driver: WebDriver, chart: str) -> int:
    return int(driver.find_element(By.ID, f"chart-{chart}").get_attribute("data-points") or 0)


def _screenshot(driver: WebDriver, tmp_path: Path, name: str) -> None:
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, max(900, int(height)))
    assert driver.save_screenshot(str(tmp_path / f"{name}.png"))
    if SCREENSHOT_DIR:
        assert driver.save_screenshot(str(Path(SCREENSHOT_DIR) / f"{name}.png"))
    driver.set_window_size(1400, 2200)


FORM = {
    "model": "meta-llama/Llama-3.1-8B",
    "hardware": "h100-sxm",
    "max_model_len": "8192",
    "rate": "4",
    "num_requests": "300",
    "sizing_hardware": "h100-sxm,a100-sxm-80gb",
    "sizing_tp": "1",
}


def test_the_page_plans_and_draws_every_figure(
    browser: WebDriver, live_server: str, tmp_path: Path
) -> None:
    _open(browser, live_server + "/")
    _fill(browser, FORM)
    for kind in ("memory", "capacity", "simulate", "sizing"):
        _run(browser, kind)
    _screenshot(browser, tmp_path, "planner")

    # The same memory request straight to the API: the page drew what the service answered.
    memory = httpx.post(
        live_server + "/v1/memory",
        json={
            "model": FORM["model"],
            "hardware": FORM["hardware"],
            "deployment": {"engine": "vllm", "max_model_len": 8192},
        },
        timeout=120,
    ).json()
    ledger = _table(browser, "ledger")
    charged = [i for i in memory["line_items"] if i["category"] != "info" and i["bytes_per_gpu"]]
    assert [row[0] for row in ledger["rows"]] == [i["name"] for i in charged]
    assert [row[4] for row in ledger["rows"]] == [i["formula"] for i in charged]
    assert _points(browser, "ledger") == len(charged)
    kv = _table(browser, "kv")
    # 256, 512, ..., 4096, then max_model_len 8192; at 8192 the engine's own max concurrency.
    assert [row[0] for row in kv["rows"]] == [256, 512, 1024, 2048, 4096, 8192]
    assert kv["rows"][-1][1] == pytest.approx(memory["max_concurrency"], rel=1e-12)
    assert _points(browser, "kv") == 6

    latency = _table(browser, "latency")
    assert len(latency["rows"]) >= 2
    rates = [row[0] for row in latency["rows"]]
    assert rates == sorted(rates)
    capacity = browser.execute_script("return window.__responses.capacity")
    for chart in ("ttft", "tpot"):
        fields = [f"{chart}_{s}_s" for s in ("p50", "p95", "p99")]
        drawn = sum(p[f] is not None for p in capacity["curve"] for f in fields)
        # Every point with a value has its 80 % interval (Llama-3.1-8B: the band of all rows).
        banded = sum(p[f"{f}_interval"] is not None for p in capacity["curve"] for f in fields)
        assert banded == drawn > 0, chart
        # p50, p95 and p99, each interval's two edges, the SLO line's two ends, the max rate's.
        assert _points(browser, chart) == 3 * drawn + 4, chart

    simulation = _table(browser, "simulation")
    assert simulation["columns"][0] == "time_s"
    assert len(simulation["rows"]) > 10
    assert simulation["columns"][-1] == "preemptions"
    assert _points(browser, "sim") == 4 * len(simulation["rows"])
    assert browser.find_elements(By.CSS_SELECTOR, "#simulate-percentiles tr")
    simulated = browser.execute_script("return window.__responses.simulate")
    for chart, metric in (("ttft-hist", "ttft_s"), ("itl-hist", "itl_s")):
        histogram = _table(browser, f"{metric[:-2]}_histogram")
        assert [row[2] for row in histogram["rows"]] == simulated["histograms"][metric]["counts"]
        assert _points(browser, chart) == 30
    # 300 requests at 4/s, the first tenth warm-up: every measured TTFT is in the histogram.
    assert (
        sum(row[2] for row in _table(browser, "ttft_histogram")["rows"]) == simulated["completed"]
    )
    p99 = latency["columns"].index("ttft_p99_s")
    p95 = latency["columns"].index("ttft_p95_s")
    assert all(r[p99] >= r[p95] for r in latency["rows"] if r[p99] is not None)
    served = latency["columns"].index("throughput_requests_per_s")
    drawn = sum(r[i] is not None for r in latency["rows"] for i in (served, served + 1))
    band = 2 if latency["band"] else 0
    assert _points(browser, "throughput") == drawn + band
    # Each run offers its HTML report.
    for kind in ("memory", "capacity", "simulate", "sizing"):
        assert browser.find_element(By.CSS_SELECTOR, f'a.report[data-kind="{kind}"]')

    plans = _table(browser, "plans")
    assert plans["rows"], "no plan"
    assert [row[0] for row in plans["rows"]] == list(range(1, len(plans["rows"]) + 1))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#plans-table tr")) == len(plans["rows"]) + 1
    assert {row[2] for row in plans["rows"]} <= {"h100-sxm", "a100-sxm-80gb"}
    pareto = _table(browser, "pareto")
    assert pareto["rows"]
    assert any(row[4] for row in pareto["rows"])
    assert _points(browser, "pareto") >= len(pareto["rows"])
    commands = browser.find_elements(By.CSS_SELECTOR, "#launch pre")
    assert commands
    assert commands[0].text.startswith("vllm serve meta-llama/Llama-3.1-8B")

    # Every figure downloads as CSV and JSON.
    figures = ("ledger", "kv", "latency", "simulation", "plans", "pareto", "rejected")
    for name in (*figures, "ttft_histogram", "itl_histogram"):
        formats = browser.find_elements(By.CSS_SELECTOR, f'.downloads[data-table="{name}"] a')
        assert {a.get_attribute("data-format") for a in formats} == {"csv", "json"}, name

    # The page's state is in its address: opening it again redraws the same memory figure.
    url = browser.current_url
    assert "max_model_len=8192" in url
    assert "run=memory" in url
    _open(browser, url.split("run=")[0] + "run=memory")
    _wait(browser, lambda d: d.execute_script("return !!window.__charts.ledger"))
    assert browser.find_element(By.ID, "f-max_model_len").get_attribute("value") == "8192"
    assert _table(browser, "kv")["rows"] == kv["rows"]


def test_h100_against_h200_for_a_70b_model(
    browser: WebDriver, live_server: str, tmp_path: Path
) -> None:
    """The first plan a new user makes: Llama-3.1-70B on H100 vs H200 against an SLO, the
    deployments side by side, the winning plan's commands and manifests, its report."""
    _open(browser, live_server + "/")
    form = {
        "model": "meta-llama/Llama-3.1-70B",
        "hardware": "h100-sxm",
        "tp": "4",
        "max_model_len": "4096",
        "rate": "1",
        "isl": "512",
        "osl": "128",
        "num_requests": "120",
        "ttft_p95_s": "2",
        "tpot_p95_s": "0.1",
        "compare": "h100-sxm:tp4, h200-sxm:tp2",
        "sizing_hardware": "h100-sxm,h200-sxm",
        "sizing_tp": "2,4",
    }
    _fill(browser, form)
    _run(browser, "compare")
    compare = _table(browser, "compare")
    assert [row[0] for row in compare["rows"]] == ["h100-sxm:tp4", "h200-sxm:tp2"]
    assert [row[1] for row in compare["rows"]] == [4, 2]
    answers = browser.execute_script("return window.__responses.compare")
    assert [a["hardware"] for a in answers] == ["h100-sxm", "h200-sxm"]
    ttft = compare["columns"].index("ttft_p95_s")
    assert [row[ttft] for row in compare["rows"]] == [a["ttft_s"]["p95"] for a in answers]
    assert _points(browser, "compare") == 4
    assert "run=compare" in browser.current_url

    _run(browser, "sizing")
    sizing = browser.execute_script("return window.__responses.sizing")
    assert sizing["plans"]
    assert {p["hardware"] for p in sizing["plans"]} <= {"h100-sxm", "h200-sxm"}
    # Why the others lost: every rejected candidate sits under its reason.
    groups = browser.find_elements(By.CSS_SELECTOR, "#rejected details")
    shown = sum(
        int(g.find_element(By.TAG_NAME, "summary").text.rsplit("(", 1)[1][:-1]) for g in groups
    )
    assert shown == len(sizing["rejected"])
    files = {
        a.get_attribute("data-file")
        for a in browser.find_elements(By.CSS_SELECTOR, "#plan-files a")
    }
    assert files == {"commands", "manifests"}
    script = browser.execute_script(
        "return window.PlannerLib.commandsScript(window.__responses.sizing)"
    )
    first = sizing["plans"][0]["launch"]["commands"][0]["command"]
    assert first in script
    # The report link fetches the HTML form of the same request and saves it.
    link = browser.find_element(By.CSS_SELECTOR, 'a.report[data-kind="sizing"]')
    link.click()
    _wait(browser, lambda d: link.text == "HTML report" or "failed" in link.text)
    assert link.text == "HTML report"
    _screenshot(browser, tmp_path, "planner-70b")


def test_a_422_is_shown_next_to_the_field_it_names(
    browser: WebDriver, live_server: str, tmp_path: Path
) -> None:
    _open(browser, live_server + "/")
    _fill(browser, {"model": "meta-llama/Llama-3.1-8B", "hardware": "h100-sxm", "tp": "3"})
    browser.find_element(By.ID, "run-memory").click()
    message = _wait(
        browser,
        lambda d: d.find_element(By.CSS_SELECTOR, '[data-error-for="tp"]').text or None,
    )
    # Llama-3.1-8B has 32 attention heads: 3 does not divide them.
    assert "32 attention heads are not divisible by tensor_parallel_size 3" in message
    field = browser.find_element(By.ID, "f-tp")
    assert "invalid" in (field.get_attribute("class") or "")
    # The message sits in the fieldset of the field, and nowhere else.
    fieldset = field.find_element(By.XPATH, "ancestor::fieldset")
    assert fieldset.find_element(By.CSS_SELECTOR, '[data-error-for="tp"]').text == message
    others = browser.find_elements(By.CSS_SELECTOR, '[data-error-for]:not([data-error-for="tp"])')
    assert all(other.text == "" for other in others)
    _screenshot(browser, tmp_path, "planner-422")

    # A valid request clears the message.
    _fill(browser, {"tp": "1"})
    _run(browser, "memory")
    assert browser.find_element(By.CSS_SELECTOR, '[data-error-for="tp"]').text == ""


def test_a_running_sizing_can_be_cancelled(browser: WebDriver, live_server: str) -> None:
    _open(browser, live_server + "/")
    _fill(browser, {"sizing_hardware": "h100-sxm,a100-sxm-80gb,l40s", "sizing_tp": "1,2"})
    browser.find_element(By.ID, "run-sizing").click()
    browser.find_element(By.CSS_SELECTOR, '[data-status="sizing"] button.cancel').click()
    _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, '[data-status="sizing"]').text)
    assert browser.find_element(By.CSS_SELECTOR, '[data-status="sizing"]').text == "cancelled"
    assert browser.execute_script("return window.__charts.plans") is None


def test_a_sizing_runs_as_a_job_with_progress_and_is_cancelled(
    browser: WebDriver, live_server: str, live_database: str
) -> None:
    """With a jobs:write key in the page the sizing is a background job: its progress shows,
    Cancel stops it on the server (the job reads ``cancelled`` through the API), and the key
    stays in the tab's sessionStorage, out of the URL."""
    token = _create_key(live_database, Scope.JOBS_WRITE)
    _open(browser, live_server + "/")
    browser.execute_script("sessionStorage.clear()")
    browser.find_element(By.ID, "f-api_key").send_keys(token)
    # 3 GPUs x 2 TP sizes, 3 plans verified by simulation: long enough to watch and cancel.
    _fill(browser, {"sizing_hardware": "h100-sxm,a100-sxm-80gb,l40s", "sizing_tp": "1,2"})
    browser.find_element(By.ID, "run-sizing").click()
    done = _wait(
        browser,
        lambda d: d.execute_script(
            "const b = document.querySelector('progress[data-kind=sizing]');"
            "return b && Number(b.dataset.done) > 0 ? [Number(b.dataset.done), b.max] : null"
        ),
    )
    assert 0 < done[0] <= done[1]
    job_id = browser.execute_script("return window.__jobs.sizing.id")
    assert job_id.startswith("job_")
    browser.find_element(By.CSS_SELECTOR, '[data-status="sizing"] button.cancel').click()
    _wait(browser, lambda d: d.execute_script("return !document.querySelector('.spinner')"))
    assert browser.find_element(By.CSS_SELECTOR, '[data-status="sizing"]').text == "cancelled"
    job = httpx.get(
        f"{live_server}/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {token}"}, timeout=60
    ).json()
    assert job["state"] == "cancelled"
    assert job["result"] is None
    assert token not in browser.current_url
    assert (
        browser.execute_script("return sessionStorage.getItem('servesize.jobs_api_key')") == token
    )
    browser.execute_script("sessionStorage.clear()")  # later tests run without a key


def _create_key(database_url: str, scope: Scope) -> str:
    engine = create_db_engine(database_url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            _, new = ApiKeyRepository(session).create(name="page", scopes=[scope])
            return new.token
    finally:
        engine.dispose()


def _log(driver: WebDriver, kind: str) -> list[dict[str, Any]]:
    """Chromium's log of ``kind`` since the last read (selenium leaves ``get_log`` untyped)."""
    entries: list[dict[str, Any]] = driver.get_log(kind)  # type: ignore[no-untyped-call]
    return entries


def _requested_urls(driver: WebDriver) -> list[str]:
    urls = []
    for entry in _log(driver, "performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def test_no_request_leaves_the_server(browser: WebDriver, live_server: str) -> None:
    for path, policy in (("/", "script-src 'self';"), ("/docs", ""), ("/redoc", "")):
        header = httpx.get(live_server + path, timeout=60).headers["content-security-policy"]
        assert header.startswith("default-src 'self';")
        assert "connect-src 'self'" in header
        assert policy in header
    _requested_urls(browser)  # drop what earlier tests left in the logs
    _log(browser, "browser")
    _open(browser, live_server + "/")
    _fill(browser, {"model": "meta-llama/Llama-3.1-8B", "hardware": "h100-sxm"})
    _run(browser, "memory")
    browser.get(live_server + "/docs")
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".swagger-ui .opblock"))
    browser.get(live_server + "/redoc")
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "[data-section-id]"))
    urls = _requested_urls(browser)
    assert any(u == live_server + "/v1/memory" for u in urls)
    assert any(u.endswith("/static/vendor/swagger-ui-bundle.js") for u in urls)
    assert any(u.endswith("/static/vendor/redoc.standalone.js") for u in urls)
    outside = [u for u in urls if not u.startswith((live_server + "/", "data:", "blob:"))]
    assert not outside
    errors = [e for e in _log(browser, "browser") if e["level"] == "SEVERE"]
    assert not errors, errors


def test_a_pasted_config_plans_like_its_catalogue_entry(
    browser: WebDriver, live_server: str
) -> None:
    config = (MODELS / "meta-llama--Llama-3.1-8B.json").read_text()
    _open(browser, live_server + "/")
    _fill(browser, {"model": "meta-llama/Llama-3.1-8B", "hardware": "h100-sxm", "tp": "1"})
    _run(browser, "memory")
    catalogue = browser.execute_script("return window.__responses.memory")
    browser.execute_script("document.getElementById('f-config').value = arguments[0]", config)
    _run(browser, "memory")
    pasted = browser.execute_script("return window.__responses.memory")
    assert pasted["kv_capacity_tokens"] == catalogue["kv_capacity_tokens"]
    assert pasted["weights_bytes_per_gpu"] == catalogue["weights_bytes_per_gpu"]
    # A config that is not JSON is refused in the page, at the field.
    browser.execute_script("document.getElementById('f-config').value = '{not json'")
    browser.find_element(By.ID, "run-memory").click()
    message = browser.find_element(By.CSS_SELECTOR, '[data-error-for="config"]').text
    assert message.startswith("not JSON")
