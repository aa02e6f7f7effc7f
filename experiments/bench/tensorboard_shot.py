"""Hand-run check (not a test): the comparison as TensorBoard shows it, in a real headless
browser. Starts `tensorboard --logdir=LOGDIR` on a free loopback port, opens its HParams
dashboard in Chromium, and saves one PNG per view (table, parallel coordinates) plus the time
series of the per-step timing scalars.

    apt-get install chromium; .venv/bin/pip install -e '.[browser]'  # once; training needs neither
    python -m experiments.bench.tensorboard_shot --logdir=runs/compare/tensorboard \
        --out=docs/screenshots

The browser is started with the flags this machine's closed network needs (no background
networking, no component updates); TensorBoard is stopped however the script ends.
"""
import os
import socket
import subprocess
import sys
import time
import urllib.request

from absl import app, flags

_LOGDIR = flags.DEFINE_string("logdir", "runs/compare/tensorboard", "A report's tensorboard/.")
_OUT = flags.DEFINE_string("out", "docs/screenshots", "Folder for the PNGs.")
_CHROMIUM = flags.DEFINE_string("chromium", "/usr/bin/chromium", "The browser to drive.")

_BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
# (file name, the dashboard's URL fragment, a tab to click or None, {search box: text to type})
_VIEWS = [("tensorboard-hparams-table", "hparams", None, {}),
          ("tensorboard-hparams-parallel", "hparams", "PARALLEL COORDINATES VIEW", {}),
          # the per-epoch step timings of the training runs (not the HParams trials' metrics)
          ("tensorboard-step-ms", "timeseries", None,
           {"Filter tags (regex)": "^step_ms/", "Filter runs (regex)": r"T\d{6}-"})]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until_serving(url, proc, timeout_s=60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"tensorboard exited with code {proc.returncode} before serving")
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"tensorboard did not serve {url} within {timeout_s}s")


def shoot(logdir, out, chromium):
    """Saves the PNGs of _VIEWS under out; returns their paths."""
    from playwright.sync_api import sync_playwright

    port = _free_port()
    url = f"http://127.0.0.1:{port}/"
    tb = subprocess.Popen([sys.executable, "-m", "tensorboard.main", f"--logdir={logdir}",
                           "--host=127.0.0.1", f"--port={port}"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    paths = []
    try:
        _wait_until_serving(url, tb)
        os.makedirs(out, exist_ok=True)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=_BROWSER_ARGS)
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            for name, fragment, tab, typed in _VIEWS:
                page.goto(f"{url}#{fragment}")
                page.wait_for_load_state("networkidle")
                if tab:
                    page.get_by_text(tab, exact=False).first.click()
                for placeholder, text in typed.items():
                    page.locator(f"input[placeholder='{placeholder}']").fill(text)
                    page.keyboard.press("Escape")  # closes the box's suggestions
                page.wait_for_load_state("networkidle")
                page.wait_for_timeout(3000)  # the dashboard draws after its data arrives
                path = os.path.join(out, f"{name}.png")
                page.screenshot(path=path, full_page=True)
                paths.append(path)
            browser.close()
    finally:
        tb.terminate()
        try:
            tb.wait(timeout=10)
        except subprocess.TimeoutExpired:
            tb.kill()
            tb.wait()
    return paths


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    if not os.path.isdir(_LOGDIR.value):
        print(f"error: --logdir={_LOGDIR.value} is not a folder (a report's tensorboard/)",
              file=sys.stderr)
        sys.exit(2)
    for path in shoot(_LOGDIR.value, _OUT.value, _CHROMIUM.value):
        print(path)


if __name__ == "__main__":
    app.run(main)
