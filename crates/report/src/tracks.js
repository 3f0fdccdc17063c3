// The timeline section: per-thread state tracks on a canvas, and flame graphs of the selected
// time range. Drag across the tracks to select a range; the two flame graphs below then hold
// only the on-CPU samples and off-CPU intervals inside it. Data: #timeline-data (JSON).
(() => {
  const src = document.getElementById("timeline-data");
  if (!src) return;
  const data = JSON.parse(src.textContent);
  const canvas = document.getElementById("timeline-canvas");
  const info = document.getElementById("timeline-info");
  const LABEL = 190, ROW = 16, GAP = 3, AXIS = 22;
  const COLORS = ["#2e7d32", "#f9a825", "#90a4ae", "#c62828", "#8d6e63", "#e0e0e0"];
  const tracks = data.threads.map(t => ({name: t.name, tid: t.tid, s: t.s}));
  if (data.gc.length) tracks.unshift({name: "Go GC (pauses)", gc: true, s: data.gc});
  let view = [0, data.end];
  let sel = null;
  let drag = null;

  const fmt = ns => {
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(3) + " s";
    if (a >= 1e6) return (ns / 1e6).toFixed(2) + " ms";
    if (a >= 1e3) return (ns / 1e3).toFixed(1) + " µs";
    return Math.round(ns) + " ns";
  };
  const width = () => canvas.clientWidth || 1200;
  const plotW = () => width() - LABEL;
  const xOf = t => LABEL + (t - view[0]) / (view[1] - view[0]) * plotW();
  const tOf = x => view[0] + (x - LABEL) / plotW() * (view[1] - view[0]);
  const sliceName = (state, sys) =>
    data.states[state] + (state !== 0 && sys ? ": " + (data.sys[sys] || "syscall " + (sys - 1)) : "");

  function draw() {
    const dpr = window.devicePixelRatio || 1;
    const w = width(), h = AXIS + tracks.length * (ROW + GAP);
    canvas.width = w * dpr;
    canvas.height = h * dpr;
    canvas.style.height = h + "px";
    const g = canvas.getContext("2d");
    g.scale(dpr, dpr);
    g.clearRect(0, 0, w, h);
    g.font = "11px sans-serif";
    g.textBaseline = "middle";
    // Axis: ten ticks over the view.
    g.fillStyle = "#555";
    for (let i = 0; i <= 10; i++) {
      const t = view[0] + (view[1] - view[0]) * i / 10;
      const x = xOf(t);
      g.fillRect(x, AXIS - 5, 1, 5);
      g.textAlign = i === 10 ? "right" : i === 0 ? "left" : "center";
      g.fillText(fmt(t), x, AXIS / 2 - 2);
    }
    let drawn = 0;
    tracks.forEach((tr, row) => {
      const y = AXIS + row * (ROW + GAP);
      g.fillStyle = "#222";
      g.textAlign = "left";
      g.fillText(tr.name.slice(0, 28), 4, y + ROW / 2);
      g.fillStyle = "#f5f5f5";
      g.fillRect(LABEL, y, plotW(), ROW);
      const step = tr.gc ? 3 : 4;
      let lastX = -1, lastState = -1;
      for (let i = 0; i < tr.s.length; i += step) {
        const start = tr.s[i], dur = tr.s[i + 1];
        if (start + dur < view[0] || start > view[1]) continue;
        const x0 = Math.max(xOf(start), LABEL), x1 = Math.min(xOf(start + dur), w);
        const state = tr.gc ? 3 : tr.s[i + 2];
        // Many slices inside one pixel: draw the pixel once per state.
        if (Math.floor(x0) === lastX && state === lastState && x1 - x0 < 1) continue;
        lastX = Math.floor(x0);
        lastState = state;
        g.fillStyle = COLORS[state];
        g.fillRect(x0, y, Math.max(x1 - x0, 0.6), ROW);
        drawn++;
      }
    });
    if (sel) {
      const a = Math.max(xOf(sel[0]), LABEL), b = Math.min(xOf(sel[1]), w);
      g.fillStyle = "rgba(33, 150, 243, 0.18)";
      g.fillRect(a, AXIS, b - a, h - AXIS);
      g.fillStyle = "#1565c0";
      g.fillRect(a, AXIS, 1, h - AXIS);
      g.fillRect(b, AXIS, 1, h - AXIS);
    }
    canvas.dataset.drawn = drawn;
  }

  // The slice of track `row` at time `t` (slices are in time order).
  function sliceAt(row, t) {
    const tr = tracks[row], step = tr.gc ? 3 : 4;
    let lo = 0, hi = tr.s.length / step - 1, found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (tr.s[mid * step] <= t) { found = mid; lo = mid + 1; } else hi = mid - 1;
    }
    if (found < 0) return null;
    const i = found * step;
    if (t > tr.s[i] + tr.s[i + 1]) return null;
    if (tr.gc) return {name: data.gcKinds[tr.s[i + 2]], start: tr.s[i], dur: tr.s[i + 1]};
    let name = sliceName(tr.s[i + 2], tr.s[i + 3]);
    // Runnable right after a sleep: woken, waiting for a CPU; right after running: preempted.
    if (tr.s[i + 2] === 1 && i >= 4 && tr.s[i - 4] + tr.s[i - 3] === tr.s[i]) {
      const before = tr.s[i - 2];
      if (before >= 2 && before <= 4) name += " (woken, waiting for a CPU)";
      else if (before === 0) name += " (preempted)";
    }
    return {name, start: tr.s[i], dur: tr.s[i + 1]};
  }

  const pos = e => {
    const r = canvas.getBoundingClientRect();
    return [e.clientX - r.left, e.clientY - r.top];
  };
  canvas.addEventListener("mousedown", e => {
    const [x] = pos(e);
    if (x < LABEL) return;
    drag = tOf(x);
    sel = [drag, drag];
    draw();
  });
  canvas.addEventListener("mousemove", e => {
    const [x, y] = pos(e);
    if (drag !== null) {
      const t = Math.min(Math.max(tOf(x), 0), data.end);
      sel = [Math.min(drag, t), Math.max(drag, t)];
      draw();
      info.textContent = "selecting " + fmt(sel[0]) + " – " + fmt(sel[1]) + " (" + fmt(sel[1] - sel[0]) + ")";
      return;
    }
    const row = Math.floor((y - AXIS) / (ROW + GAP));
    if (x < LABEL || row < 0 || row >= tracks.length) return;
    const s = sliceAt(row, tOf(x));
    info.textContent = tracks[row].name + " at " + fmt(tOf(x)) +
      (s ? ": " + s.name + " for " + fmt(s.dur) + " (from " + fmt(s.start) + ")" : "");
  });
  const finish = () => {
    if (drag === null) return;
    drag = null;
    if (sel && sel[1] - sel[0] < (view[1] - view[0]) / 1000) sel = null;
    draw();
    refilter();
  };
  canvas.addEventListener("mouseup", finish);
  canvas.addEventListener("mouseleave", finish);
  document.getElementById("timeline-zoom").addEventListener("click", () => {
    if (sel) { view = sel.slice(); draw(); }
  });
  document.getElementById("timeline-reset").addEventListener("click", () => {
    view = [0, data.end];
    sel = null;
    draw();
    refilter();
  });

  // Flame graphs of the range: root at the bottom, each frame as wide as its share.
  function flame(el, title, unit, entries) {
    const root = {name: "all", v: 0, kids: new Map()};
    let total = 0;
    for (const [stack, tid, v] of entries) {
      total += v;
      let node = root;
      node.v += v;
      const names = [data.comm[tid] || "tid " + tid].concat(data.stacks[stack].map(f => data.frames[f]));
      for (const name of names) {
        let k = node.kids.get(name);
        if (!k) { k = {name, v: 0, kids: new Map()}; node.kids.set(name, k); }
        k.v += v;
        node = k;
      }
    }
    el.dataset.samples = entries.length;
    const range = sel ? fmt(sel[0]) + " – " + fmt(sel[1]) : "the whole run";
    const head = "<h3>" + title + " — " + range + ": " +
      (unit === "ns" ? fmt(total) : total + " samples") + "</h3>";
    if (!total) { el.innerHTML = head + "<p class=\"empty\">Nothing in this range.</p>"; return; }
    let depth = 0;
    const rects = [];
    const W = 1180, H = 16;
    (function layout(node, x, d) {
      depth = Math.max(depth, d);
      const w = node.v / total * W;
      if (w < 0.3) return;
      rects.push([x, d, w, node]);
      let cx = x;
      for (const k of [...node.kids.values()].sort((a, b) => a.name < b.name ? -1 : 1)) {
        layout(k, cx, d + 1);
        cx += k.v / total * W;
      }
    })(root, 0, 0);
    const height = (depth + 1) * H;
    const esc = s => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
    let svg = "<svg class=\"tl-flame\" viewBox=\"0 0 " + W + " " + height + "\" width=\"100%\">";
    for (const [x, d, w, node] of rects) {
      const y = height - (d + 1) * H;
      const hue = node.name.endsWith("_[k]") ? 200 : node.name.endsWith("_[j]") ? 120 : 20;
      const light = 55 + (node.name.length * 7) % 20;
      const share = (100 * node.v / total).toFixed(2);
      const label = w > 30 ? esc(node.name.slice(0, Math.floor(w / 6.5))) : "";
      svg += "<g><title>" + esc(node.name) + " (" + (unit === "ns" ? fmt(node.v) : node.v + " samples") +
        ", " + share + "%)</title><rect x=\"" + x.toFixed(1) + "\" y=\"" + y + "\" width=\"" +
        Math.max(w - 0.5, 0.3).toFixed(1) + "\" height=\"" + (H - 1) + "\" fill=\"hsl(" + hue + ",80%," +
        light + "%)\"></rect>" + (label ? "<text x=\"" + (x + 3).toFixed(1) + "\" y=\"" + (y + 11) +
        "\">" + label + "</text>" : "") + "</g>";
    }
    el.innerHTML = head + svg + "</svg>";
  }

  function refilter() {
    const [a, b] = sel || [0, data.end];
    const on = [], off = [];
    for (let i = 0; i < data.on.length; i += 3) {
      const t = data.on[i];
      if (t >= a && t <= b) on.push([data.on[i + 2], data.on[i + 1], 1]);
    }
    // Idle waits (the 5th value: 1) only when asked for, as in the off-CPU flame graph.
    const hideIdle = idleBox !== null && !idleBox.checked;
    for (let i = 0; i < data.off.length; i += 5) {
      const t = data.off[i];
      if (t >= a && t <= b && !(hideIdle && data.off[i + 4])) off.push([data.off[i + 2], data.off[i + 1], data.off[i + 3]]);
    }
    flame(document.getElementById("timeline-flame-oncpu"), "On-CPU", "samples", on);
    flame(document.getElementById("timeline-flame-offcpu"), hideIdle ? "Off-CPU, idle waits left out" : "Off-CPU", "ns", off);
  }
  const idleBox = document.getElementById("timeline-idle");
  if (idleBox) idleBox.addEventListener("change", refilter);

  window.switchyardTimeline = {
    select(a, b) { sel = [a, b]; draw(); refilter(); },
    tracks: tracks.length,
  };
  draw();
  refilter();
  window.addEventListener("resize", draw);
})();
