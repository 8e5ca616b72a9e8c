"""Drives mcpwire's admin UI in a real headless Chromium (Debian's chromium and chromium-driver)
with Selenium, for tests/admin_ui.rs. It only acts and observes: it prints one JSON object with
what it saw, and the Rust test asserts on it.

Environment (set by the test):
  ADMIN_URL        the admin UI, e.g. http://127.0.0.1:PORT
  CP_URL           the local control plane
  CP_KEY           its bearer key (for the test hooks that queue commands)
  TUNNEL_ID        the tunnel
  SHOTS_DIR        where to write one screenshot per panel
  DOWNLOAD_DIR     where Chromium saves the diagnostic bundle
  CHROMIUM, CHROMEDRIVER  the browser and its driver (default /usr/bin/...)
"""

import http.server
import json
import os
import socket
import sys
import threading
import time
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

ADMIN = os.environ["ADMIN_URL"].rstrip("/")
CP = os.environ["CP_URL"].rstrip("/")
KEY = os.environ["CP_KEY"]
TUNNEL = os.environ["TUNNEL_ID"]
SHOTS = os.environ["SHOTS_DIR"]
DOWNLOADS = os.environ["DOWNLOAD_DIR"]
PORT = ADMIN.rsplit(":", 1)[1]
WAIT = 20  # seconds any one observation may take at most (a bound, not a measurement)

report = {}


def queue(commands):
    req = urllib.request.Request(
        f"{CP}/admin/tunnels/{TUNNEL}/commands",
        data=json.dumps({"commands": commands}).encode(),
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=WAIT) as r:
        r.read()


def command(request_id, channel, rpc):
    return {
        "request_id": request_id,
        "shard_token": f"shard-secret-{request_id}",
        "command_type": "jsonrpc",
        "channel": channel,
        "created_at": "2026-01-01T00:00:00Z",
        "headers": {},
        "jsonrpc": rpc,
    }


def tools_call(id_, tool, args):
    return {
        "jsonrpc": "2.0",
        "id": id_,
        "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": args,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }


def sse_text(path, seconds):
    """What an event stream sends in `seconds` (it never ends by itself)."""
    host, port = "127.0.0.1", int(PORT)
    s = socket.create_connection((host, port), timeout=WAIT)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n\r\n".encode())
    s.settimeout(0.2)
    out = b""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            break
        out += chunk
    s.close()
    return out.decode("utf-8", "replace")


def shot(driver, panel):
    driver.find_element(By.CSS_SELECTOR, f'nav button[data-panel="{panel}"]').click()
    time.sleep(0.3)
    path = os.path.join(SHOTS, f"{panel}.png")
    driver.save_screenshot(path)
    return path


class Attacker(http.server.BaseHTTPRequestHandler):
    """A page on another origin that tries to change the admin UI's log level."""

    def do_GET(self):
        body = b"<!doctype html><title>elsewhere</title><p>another site</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for flag in [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1400,900",
        # A name that is not loopback but reaches this host: what a remote or DNS-rebinding
        # visitor's Host header looks like.
        "--host-resolver-rules=MAP admin-ui.test 127.0.0.1",
    ]:
        options.add_argument(flag)
    options.add_experimental_option(
        "prefs",
        {"download.default_directory": DOWNLOADS, "download.prompt_for_download": False},
    )
    service = Service(executable_path=os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
    driver = webdriver.Chrome(service=service, options=options)
    try:
        run(driver)
    finally:
        driver.quit()
    print(json.dumps(report))


def run(driver):
    # Polled every 20 ms (Selenium's default is 500 ms, too coarse to time a live update).
    wait = WebDriverWait(driver, WAIT, poll_frequency=0.02)
    driver.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": DOWNLOADS})
    driver.get(ADMIN + "/")
    wait.until(lambda d: d.find_element(By.ID, "tunnel-id").text != "")
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#channels tbody tr")) > 0)
    report["channels"] = [
        [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        for tr in driver.find_elements(By.CSS_SELECTOR, "#channels tbody tr")
    ]
    report["tunnel_id_shown"] = driver.find_element(By.ID, "tunnel-id").text
    wait.until(lambda d: d.find_element(By.ID, "ready-badge").text == "ready")
    report["ready_badge"] = driver.find_element(By.ID, "ready-badge").text
    report["server_info_shown"] = driver.find_element(By.ID, "server-info").text
    report["poll_facts"] = driver.find_element(By.ID, "poll-facts").text
    shots = [shot(driver, "overview")]

    # A command sent through the control plane appears without a reload.
    driver.find_element(By.CSS_SELECTOR, 'nav button[data-panel="commands"]').click()
    driver.execute_script("window.__noReload = 'still here'")
    sent = time.monotonic()
    queue([command("ui-ok-1", "main", tools_call(1, "echo", {"text": "hello from the browser test"}))])
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, 'tr[data-request-id="ui-ok-1"]'))
    report["command_seen_after_ms"] = round((time.monotonic() - sent) * 1000)
    report["no_reload"] = driver.execute_script("return window.__noReload") == "still here"
    row = driver.find_element(By.CSS_SELECTOR, 'tr[data-request-id="ui-ok-1"]')
    report["ok_row"] = [td.text for td in row.find_elements(By.TAG_NAME, "td")]

    # A failing command shows its failure source.
    queue([command("ui-fail-1", "broken", tools_call(2, "echo", {"text": "nobody listens"}))])
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, 'tr[data-request-id="ui-fail-1"]'))
    row = driver.find_element(By.CSS_SELECTOR, 'tr[data-request-id="ui-fail-1"]')
    report["failed_row"] = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
    # The filter by outcome hides the others.
    Select(driver.find_element(By.ID, "filter-outcome")).select_by_value("failed")
    report["filtered_visible"] = [
        tr.get_attribute("data-request-id")
        for tr in driver.find_elements(By.CSS_SELECTOR, "#commands-table tbody tr")
        if tr.is_displayed()
    ]
    shots.append(shot(driver, "commands"))
    driver.find_element(By.CSS_SELECTOR, 'nav button[data-panel="commands"]').click()
    Select(driver.find_element(By.ID, "filter-outcome")).select_by_value("")

    # The log level changes from the page and takes effect (debug lines appear).
    driver.find_element(By.CSS_SELECTOR, 'nav button[data-panel="logs"]').click()
    Select(driver.find_element(By.ID, "filter-level")).select_by_value("debug")
    Select(driver.find_element(By.ID, "set-level")).select_by_value("debug")
    driver.find_element(By.ID, "apply-level").click()
    wait.until(lambda d: "log level is now debug" in d.find_element(By.ID, "logs-status").text)
    report["level_status"] = driver.find_element(By.ID, "logs-status").text
    queue([command("ui-ok-2", "main", tools_call(3, "echo", {"text": "after the level change"}))])
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#log-lines div[data-level="debug"]'))
    report["debug_lines_seen"] = len(driver.find_elements(By.CSS_SELECTOR, '#log-lines div[data-level="debug"]'))
    report["level_change_line"] = any(
        "log level changed from the admin UI" in d.text
        for d in driver.find_elements(By.CSS_SELECTOR, "#log-lines div")
    )
    shots.append(shot(driver, "logs"))

    # The diagnostic bundle, downloaded by its button.
    driver.find_element(By.CSS_SELECTOR, 'nav button[data-panel="logs"]').click()
    driver.find_element(By.ID, "bundle").click()
    deadline = time.monotonic() + WAIT
    bundle = None
    while time.monotonic() < deadline and bundle is None:
        for name in os.listdir(DOWNLOADS):
            if name.startswith("mcpwire-diagnostics-") and name.endswith(".json"):
                with open(os.path.join(DOWNLOADS, name), encoding="utf-8") as f:
                    bundle = f.read()
        time.sleep(0.1)
    report["bundle"] = bundle

    # Metrics and Harpoon panels.
    driver.find_element(By.CSS_SELECTOR, 'nav button[data-panel="metrics"]').click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#chart-rates polyline"))
    time.sleep(2.5)
    report["chart_lines"] = len(driver.find_elements(By.CSS_SELECTOR, "svg.chart polyline"))
    shots.append(shot(driver, "metrics"))

    # Harpoon: one call through it, then its panel.
    harpoon_call = tools_call(4, "call_target", {"label": "docs", "method": "GET"})
    queue([command("ui-harpoon-1", "harpoon", harpoon_call)])
    driver.find_element(By.CSS_SELECTOR, 'nav button[data-panel="harpoon"]').click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#harpoon-calls tbody tr"))
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#harpoon-targets tbody tr"))
    report["harpoon_targets"] = [
        [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        for tr in driver.find_elements(By.CSS_SELECTOR, "#harpoon-targets tbody tr")
    ]
    report["harpoon_calls"] = [
        [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        for tr in driver.find_elements(By.CSS_SELECTOR, "#harpoon-calls tbody tr")
    ]
    report["harpoon_text"] = driver.find_element(By.ID, "harpoon").text
    shots.append(shot(driver, "harpoon"))

    # Everything the page holds, and what its streams send.
    report["page_html"] = driver.page_source
    report["stream_commands"] = sse_text("/admin/events/commands?after=0", 1.5)
    report["stream_logs"] = sse_text("/admin/events/logs?after=0", 1.5)
    report["api_texts"] = {}
    for path in ["overview", "commands", "logs", "metrics", "harpoon"]:
        with urllib.request.urlopen(ADMIN + "/admin/api/" + path, timeout=WAIT) as r:
            report["api_texts"][path] = r.read().decode("utf-8", "replace")

    # A cross-origin POST from another site is refused (and changes nothing).
    attacker = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Attacker)
    threading.Thread(target=attacker.serve_forever, daemon=True).start()
    driver.get(f"http://127.0.0.1:{attacker.server_address[1]}/")
    report["cross_origin"] = driver.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        fetch(arguments[0] + "/admin/api/log-level", {method: "POST", mode: "no-cors",
              headers: {"Content-Type": "text/plain"}, body: '{"level":"error"}'})
          .then(r => done("sent: " + r.type), e => done("error: " + e));
        """,
        ADMIN,
    )
    attacker.shutdown()
    with urllib.request.urlopen(
        urllib.request.Request(ADMIN + "/admin/api/overview", headers={"Host": f"127.0.0.1:{PORT}"}),
        timeout=WAIT,
    ) as r:
        report["level_after_cross_origin"] = json.loads(r.read())["log_level"]

    # A visitor under a name that is not loopback is refused.
    driver.get(f"http://admin-ui.test:{PORT}/")
    report["foreign_host_page"] = driver.find_element(By.TAG_NAME, "body").text
    report["screenshots"] = shots


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # the report says what failed; the test prints it
        report["error"] = f"{type(e).__name__}: {e}"
        print(json.dumps(report))
        sys.exit(1)
