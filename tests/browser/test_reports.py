"""The offline HTML reports opened from disk in headless Chromium: the figures drawn from the
inlined answer, and not one request made (the file holds every script it runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from typer.testing import CliRunner

from servesize.cli import app as cli_app

WAIT_S = 120  # bounds a page that never draws; nothing is timed against it
MEMORY = {
    "model": "meta-llama/Llama-3.1-8B",
    "hardware": "h100-sxm",
    "deployment": {"max_model_len": 8192},
}
SIZING = {
    "model": "meta-llama/Llama-3.1-8B",
    "traffic": {"rate_per_s": 4, "input_tokens": 1024, "output_tokens": 256},
    "slo": {"ttft_s": {"p95": 1.0}, "tpot_s": {"p95": 0.05}},
    "candidates": {"hardware": ["h100-sxm"], "tensor_parallel": [1, 2]},
    "verify_top": 1,
}


def _open_file(driver: WebDriver, path: Path) -> list[str]:
    """Open the report; the URLs the browser requested for it."""
    driver.get_log("performance")  # type: ignore[no-untyped-call]
    driver.get(path.as_uri())
    WebDriverWait(driver, WAIT_S).until(
        lambda d: d.execute_script("return document.body.dataset.ready") == "true"
    )
    urls = []
    for entry in driver.get_log("performance"):  # type: ignore[no-untyped-call]
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def _table(driver: WebDriver, name: str) -> dict[str, Any]:
    table: dict[str, Any] = driver.execute_script(f"return window.__charts[{json.dumps(name)}]")
    return table


def _offline(urls: list[str], path: Path) -> None:
    assert path.as_uri() in urls
    assert all(u == path.as_uri() or u.startswith(("data:", "blob:")) for u in urls), urls


def test_memory_and_sizing_reports_from_the_api_draw_offline(
    browser: WebDriver, live_server: str, tmp_path: Path
) -> None:
    answer = httpx.post(f"{live_server}/v1/memory", json=MEMORY, timeout=120).json()
    report = httpx.post(f"{live_server}/v1/memory?format=html", json=MEMORY, timeout=120)
    assert report.headers["content-type"] == "text/html; charset=utf-8"
    memory_file = tmp_path / "memory.html"
    memory_file.write_text(report.text)
    _offline(_open_file(browser, memory_file), memory_file)
    charged = [i for i in answer["line_items"] if i["category"] != "info" and i["bytes_per_gpu"]]
    assert [row[0] for row in _table(browser, "ledger")["rows"]] == [i["name"] for i in charged]
    kv = _table(browser, "kv")["rows"]
    assert kv[-1][0] == 8192
    assert kv[-1][1] == pytest.approx(answer["max_concurrency"], rel=1e-12)
    assert browser.find_element(By.ID, "chart-kv").get_attribute("data-points") == str(len(kv))
    browser.save_screenshot(str(tmp_path / "memory-report.png"))

    sizing = httpx.post(
        f"{live_server}/v1/sizing", json=SIZING, headers={"Accept": "text/html"}, timeout=600
    )
    assert sizing.status_code == 200, sizing.text[:500]
    sizing_file = tmp_path / "sizing.html"
    sizing_file.write_text(sizing.text)
    _offline(_open_file(browser, sizing_file), sizing_file)
    plans = _table(browser, "plans")["rows"]
    assert plans
    assert len(browser.find_elements(By.CSS_SELECTOR, "#plans-table tr")) == len(plans) + 1
    assert _table(browser, "pareto")["rows"]
    assert browser.find_elements(By.CSS_SELECTOR, "#launch pre")
    browser.save_screenshot(str(tmp_path / "sizing-report.png"))


def test_the_cli_writes_the_same_memory_report(
    browser: WebDriver, live_server: str, tmp_path: Path
) -> None:
    path = tmp_path / "cli-memory.html"
    argv = ["memory", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm"]
    argv += ["--max-model-len", "8192", "--report", str(path)]
    result = CliRunner().invoke(cli_app, argv)
    assert result.exit_code == 0, result.output
    _offline(_open_file(browser, path), path)
    inlined = browser.execute_script("return window.__responses.memory")
    # The CLI's report holds the answer the API gives for the same request.
    request = {**MEMORY, "deployment": {"engine": "vllm", "max_model_len": 8192}}
    answer = httpx.post(f"{live_server}/v1/memory", json=request, timeout=120).json()
    # The offline report carries no launch commands (the API's `launch`/`launch_unsupported`).
    launch_keys = {"launch", "launch_unsupported"}

    def without_launch(body: dict[str, object]) -> dict[str, object]:
        return {k: v for k, v in body.items() if k not in launch_keys}

    assert without_launch(inlined) == without_launch(answer)
    # At 8192 tokens a request holds 512 whole blocks of 16: capacity / 8192 requests.
    assert answer["kv_block_size"] == 16
    kv = _table(browser, "kv")["rows"]
    capacity = answer["kv_capacity_tokens"]
    assert kv[-1] == [8192, capacity / 8192, capacity // 8192]
    assert _table(browser, "ledger")["rows"][0][0] == "weights: embedding"


def test_the_cli_writes_simulation_and_sizing_reports_that_draw_offline(
    browser: WebDriver, tmp_path: Path
) -> None:
    simulate_file = tmp_path / "cli-simulate.html"
    argv = ["simulate", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm", "--rate", "3"]
    argv += ["--input-tokens", "256", "--output-tokens", "16", "--num-requests", "60"]
    result = CliRunner().invoke(cli_app, [*argv, "--report", str(simulate_file)])
    assert result.exit_code == 0, result.output
    _offline(_open_file(browser, simulate_file), simulate_file)
    simulation = _table(browser, "simulation")
    assert simulation["columns"][0] == "time_s"
    assert simulation["rows"]
    drawn = browser.find_element(By.ID, "chart-sim").get_attribute("data-points")
    assert simulation["columns"][-1] == "preemptions"
    assert drawn == str(4 * len(simulation["rows"]))  # queue, batch, KV use, preemptions
    browser.save_screenshot(str(tmp_path / "cli-simulate-report.png"))

    sizing_file = tmp_path / "cli-sizing.html"
    argv = ["size", "--model", "meta-llama/Llama-3.1-8B", "--rate", "4", "--gpu", "h100-sxm"]
    argv += ["--slo", "ttft_p95=1s,tpot_p95=50ms", "--tp", "1", "--verify-top", "1"]
    result = CliRunner().invoke(cli_app, [*argv, "--report", str(sizing_file)])
    assert result.exit_code == 0, result.output
    _offline(_open_file(browser, sizing_file), sizing_file)
    plans = _table(browser, "plans")["rows"]
    assert plans
    assert {row[2] for row in plans} == {"h100-sxm"}
    assert browser.find_elements(By.CSS_SELECTOR, "#launch pre")
