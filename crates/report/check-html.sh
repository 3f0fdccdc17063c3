#!/usr/bin/env bash
# Opens a switchyard HTML report in headless Chromium and checks that it works:
#   - no console error, no uncaught exception and no failed load (the report must work offline),
#     while loading and while using it: each sortable table is sorted, each flame graph is
#     zoomed, unzoomed, searched and hovered;
#   - each flame graph's script ran (its frames are drawn and answer clicks);
#   - a timeline's tracks are drawn, hovering names a slice, and dragging a range re-filters
#     its flame graphs.
#   - every table (div.scroll) fits its box at 1400 px, folded ones opened to measure (a
#     table.wide, with a column per histogram bucket, may scroll in its box);
#   - each "show idle waits" checkbox swaps a flame graph without idle waits for the one with
#     them, and back (the timeline's re-draws its off-CPU graph with them);
# It writes a screenshot of the page as loaded (1400x2400; FULL_PAGE=1: the whole page;
# SECTION=ID: only the element with that id, e.g. SECTION=flame-offcpu; CLICK=SELECTOR: click
# the elements it matches first, e.g. CLICK='label.idle-label').
# Exit 0 when clean, 1 otherwise.
#
# usage: crates/report/check-html.sh REPORT.html [SCREENSHOT.png]
#        (default screenshot: REPORT.png next to the report)
#
# Chromium is installed with apt-get when missing (Debian's `chromium` package). The page is
# driven over the DevTools protocol (--remote-debugging-port on 127.0.0.1) by a small Python 3
# script, standard library only.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
    echo "usage: $0 REPORT.html [SCREENSHOT.png]" >&2
    exit 2
fi
html=$(realpath "$1")
png=${2:-${html%.html}.png}
png=$(realpath -m "$png")
if [[ ! -f $html ]]; then
    echo "error: $1 does not exist" >&2
    exit 2
fi

if ! command -v chromium >/dev/null 2>&1; then
    echo "installing chromium (apt-get)…" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y chromium >/dev/null 2>&1 || {
        apt-get update -q >/dev/null
        apt-get install -y chromium >/dev/null
    }
fi

profile=$(mktemp -d -t switchyard-chromium.XXXXXX)
trap 'rm -rf "$profile"' EXIT

python3 - "$html" "$png" "$profile" <<'PY'
import base64, json, os, socket, struct, subprocess, sys, time, urllib.request

html, png, profile = sys.argv[1:4]
flags = [
    "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
    "--no-first-run", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", f"--user-data-dir={profile}", "--window-size=1400,2400",
    "--hide-scrollbars", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
    "about:blank",
]


class DevTools:
    """The DevTools protocol of one page, over a minimal WebSocket client (RFC 6455)."""

    def __init__(self, url):
        hostport, path = url[len("ws://"):].split("/", 1)
        host, port = hostport.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((
            f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            self.buf += self._recv()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise RuntimeError(f"DevTools refused the connection: {head[:200]!r}")
        self.next_id = 0
        self.events = []

    def _recv(self):
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise EOFError("chromium closed the DevTools connection")
        return chunk

    def _read(self, n):
        while len(self.buf) < n:
            self.buf += self._recv()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _send(self, text):
        data = text.encode()
        header = bytearray([0x81])  # one final text frame
        if len(data) < 126:
            header.append(0x80 | len(data))
        elif len(data) < 1 << 16:
            header.append(0x80 | 126)
            header += struct.pack(">H", len(data))
        else:
            header.append(0x80 | 127)
            header += struct.pack(">Q", len(data))
        mask = os.urandom(4)  # a client masks every frame
        self.sock.sendall(bytes(header) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _message(self):
        message = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(n)
            if b0 & 0x0F == 0x8:
                raise EOFError("chromium closed the DevTools connection")
            if b0 & 0x0F in (0x0, 0x1, 0x2):
                message += payload
                if b0 & 0x80:
                    return json.loads(message)

    def call(self, method, params=None, timeout=30):
        self.next_id += 1
        self._send(json.dumps({"id": self.next_id, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            reply = self._message()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)
        raise TimeoutError(f"{method}: no answer in {timeout} s")

    def wait_for(self, method, timeout=30):
        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            e = self._message()
            if e.get("method") == method:
                return e
            self.events.append(e)
        raise TimeoutError(f"no {method} in {timeout} s")


log = open(os.path.join(profile, "chromium.log"), "wb")
proc = subprocess.Popen(flags, stdout=log, stderr=log)
problems = []
page = None
try:
    # Chromium writes the port it picked into DevToolsActivePort.
    active = os.path.join(profile, "DevToolsActivePort")
    deadline = time.monotonic() + 30
    while not (os.path.exists(active) and open(active).read().strip()):
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"error: chromium did not start (see {log.name})")
        time.sleep(0.1)
    port = int(open(active).read().split()[0])
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
        pages = [t for t in json.load(r) if t.get("type") == "page"]
    page = DevTools(pages[0]["webSocketDebuggerUrl"])
    for domain in ("Runtime", "Log", "Page"):
        page.call(f"{domain}.enable")
    page.call("Emulation.setDeviceMetricsOverride",
              {"width": 1400, "height": 2400, "deviceScaleFactor": 1, "mobile": False})
    page.call("Page.navigate", {"url": "file://" + html})
    page.wait_for("Page.loadEventFired")
    # inferno finishes its drawing in a setTimeout(0); let it run.
    page.call("Runtime.evaluate", {"expression": "new Promise(r => setTimeout(r, 300))",
                                   "awaitPromise": True})
    click = os.environ.get("CLICK")
    if click:
        n = page.call("Runtime.evaluate", {"expression": f"""(async () => {{
            const els = document.querySelectorAll({json.dumps(click)});
            els.forEach(el => el.click());
            await new Promise(r => setTimeout(r, 300));
            return els.length;
        }})()""", "awaitPromise": True, "returnByValue": True})["result"].get("value")
        if not n:
            sys.exit(f"error: nothing on the page matches CLICK={click!r}")
    # The screenshot shows the page as loaded, before the checks below sort and zoom.
    shot = {"format": "png"}
    section = os.environ.get("SECTION")
    if section:
        box = page.call("Runtime.evaluate", {"expression": f"""(() => {{
            const el = document.getElementById({json.dumps(section)});
            if (!el) return null;
            const r = el.getBoundingClientRect();
            return JSON.stringify({{x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height}});
        }})()""", "returnByValue": True})["result"].get("value")
        if not box:
            sys.exit(f"error: the report has no section with id {section!r}")
        box = json.loads(box)
        shot.update(captureBeyondViewport=True,
                    clip={"x": max(box["x"] - 16, 0), "y": max(box["y"] - 16, 0),
                          "width": min(box["w"] + 32, 1400), "height": min(box["h"] + 32, 2400),
                          "scale": 1})
    elif os.environ.get("FULL_PAGE"):
        size = page.call("Page.getLayoutMetrics")["cssContentSize"]
        shot.update(captureBeyondViewport=True,
                    clip={"x": 0, "y": 0, "width": 1400, "height": size["height"], "scale": 1})
    shot = page.call("Page.captureScreenshot", shot)
    with open(png, "wb") as f:
        f.write(base64.b64decode(shot["data"]))
    exercise = r"""
(async () => {
  const problems = [];
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  const click = (el) => el.dispatchEvent(new MouseEvent("click", {bubbles: true, cancelable: true}));
  // Every table fits the page's width (1400 px) as loaded: one that scrolls hides its last
  // columns where scroll bars are hidden (macOS, touch screens). A folded one is measured open;
  // a table.wide has as many columns as its data (histogram buckets) and may scroll.
  for (const box of document.querySelectorAll("div.scroll")) {
    if (box.querySelector("table.wide")) continue;
    const fold = box.closest("details"), open = fold && fold.open;
    if (fold) fold.open = true;
    const over = box.scrollWidth - box.clientWidth;
    if (over > 1) {
      const t = box.querySelector("table");
      problems.push(`${(t && t.id) || "a table"} is ${over} px wider than its box (${box.clientWidth} px) at 1400 px`);
    }
    if (fold) fold.open = open;
  }
  for (const table of document.querySelectorAll("table.sortable")) {
    const heads = table.tHead.rows[0].cells;
    for (const th of heads) { th.click(); th.click(); }
    heads[heads.length - 1].click();
  }
  const graphs = document.querySelectorAll("div.flame iframe");
  for (const f of graphs) {
    const w = f.contentWindow, d = f.contentDocument;
    if (!d) { problems.push(f.id + ": its document cannot be reached"); continue; }
    const frames = d.getElementById("frames");
    if (!frames || frames.children.length === 0) { problems.push(f.id + ": no frames drawn"); continue; }
    if (!w.svg || !w.unzoombtn) { problems.push(f.id + ": the graph's init() did not run"); continue; }
    const deepest = frames.children[frames.children.length - 1];
    deepest.dispatchEvent(new MouseEvent("mouseover", {bubbles: true}));
    if (!d.getElementById("details").textContent.trim()) problems.push(f.id + ": hover shows no details");
    click(deepest.querySelector("rect"));
    await sleep(20);
    if (d.getElementById("unzoom").classList.contains("hide")) problems.push(f.id + ": a click did not zoom");
    click(d.getElementById("unzoom"));
    await sleep(20);
    if (!d.getElementById("unzoom").classList.contains("hide")) problems.push(f.id + ": reset zoom did not unzoom");
    w.search(".");
    await sleep(20);
    if (!/Matched/.test(d.getElementById("matched").textContent)) problems.push(f.id + ": search matched nothing");
    if (w.searching) w.search_prompt();  // while searching, this resets the search (no prompt)
  }
  // Idle waits: the checkbox shows the graph with them in place of the one without, and back.
  const shown = el => !!el && el.getBoundingClientRect().height > 0 && getComputedStyle(el).visibility === "visible";
  for (const box of document.querySelectorAll("input.idle-switch")) {
    const section = box.closest("section");
    const off = section.querySelector(".idle-off iframe, .idle-off p.empty");
    const on = section.querySelector(".idle-on iframe");
    const label = section.querySelector(`label[for="${box.id}"]`);
    // Which views show (without idle, with idle), for the box unticked and ticked.
    const state = () => [shown(off), shown(on)].join();
    const want = checked => checked ? "false,true" : "true,false";
    if (!label) { problems.push(box.id + ": no label"); continue; }
    const first = box.checked;
    if (state() !== want(first)) problems.push(box.id + ": shows " + state() + " (without idle, with idle)");
    label.click();
    if (box.checked === first || state() !== want(!first)) problems.push(box.id + ": a click shows " + state());
    label.click();
    if (box.checked !== first || state() !== want(first)) problems.push(box.id + ": a second click shows " + state());
  }
  // The timeline: tracks drawn, and a range dragged across them re-filters its flame graphs.
  let timeline = null;
  const canvas = document.getElementById("timeline-canvas");
  if (canvas) {
    const drawn = +canvas.dataset.drawn;
    if (!(drawn > 0)) problems.push("timeline: no slices drawn");
    const on = document.getElementById("timeline-flame-oncpu");
    const before = +on.dataset.samples;
    const r = canvas.getBoundingClientRect();
    const at = f => ({clientX: r.left + 190 + (r.width - 190) * f, clientY: r.top + 30, bubbles: true});
    canvas.dispatchEvent(new MouseEvent("mousemove", at(0.5)));
    if (!/at /.test(document.getElementById("timeline-info").textContent)) problems.push("timeline: hover shows nothing");
    canvas.dispatchEvent(new MouseEvent("mousedown", at(0.25)));
    canvas.dispatchEvent(new MouseEvent("mousemove", at(0.5)));
    canvas.dispatchEvent(new MouseEvent("mouseup", at(0.5)));
    const after = +on.dataset.samples;
    if (!(after < before)) problems.push(`timeline: selecting a quarter of the run kept ${after} of ${before} on-CPU samples`);
    if (!/ – /.test(on.querySelector("h3").textContent)) problems.push("timeline: the flame graph does not name the selected range");
    document.getElementById("timeline-reset").click();
    if (+on.dataset.samples !== before) problems.push("timeline: 'Whole run' did not restore every sample");
    const idleBox = document.getElementById("timeline-idle");
    if (idleBox) {
      const off = document.getElementById("timeline-flame-offcpu");
      // More intervals with idle waits than without (CLICK may have ticked the box already).
      const first = idleBox.checked, was = +off.dataset.samples;
      idleBox.click();
      const now = +off.dataset.samples;
      if (first ? !(now < was) : !(now > was)) problems.push(`timeline: 'show idle waits' went from ${was} to ${now} off-CPU intervals`);
      idleBox.click();
      if (+off.dataset.samples !== was) problems.push("timeline: a second click on 'show idle waits' did not restore the graph");
    }
    timeline = {tracks: window.switchyardTimeline.tracks, drawn, before, after};
  }
  return {problems, graphs: graphs.length, timeline,
          idle: document.querySelectorAll("input.idle-switch").length,
          empty: document.querySelectorAll("p.empty").length,
          sortable: document.querySelectorAll("table.sortable").length};
})()
"""
    result = page.call("Runtime.evaluate", {"expression": exercise, "awaitPromise": True,
                                             "returnByValue": True})
    if "exceptionDetails" in result:
        problems.append("the checks themselves failed: " +
                        json.dumps(result["exceptionDetails"].get("exception", {}).get("description")))
    else:
        value = result["result"]["value"]
        problems += value["problems"]
        print(f"flame graphs: {value['graphs']} drawn, {value['empty']} empty; "
              f"sortable tables: {value['sortable']}; idle-wait toggles: {value['idle']}")
        if value["timeline"]:
            t = value["timeline"]
            print(f"timeline: {t['tracks']} tracks, {t['drawn']} slices drawn; a quarter of the "
                  f"run selected holds {t['after']} of {t['before']} on-CPU samples")
    # Collect what arrived meanwhile.
    page.call("Runtime.evaluate", {"expression": "1"})
finally:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()

for e in page.events if page else []:
    method, params = e.get("method"), e.get("params", {})
    if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
        text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
        problems.append(f"console.{params['type']}: {text}")
    elif method == "Runtime.exceptionThrown":
        d = params.get("exceptionDetails", {})
        desc = d.get("exception", {}).get("description") or d.get("text")
        problems.append(f"uncaught exception: {desc} ({d.get('url', '')}:{d.get('lineNumber', '?')})")
    elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
        entry = params["entry"]
        problems.append(f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}".strip())

print(f"screenshot: {png}")
if problems:
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    sys.exit(1)
print(f"ok: {html} loads and works without console errors")
PY
