// The live view: it keeps the newest state the server sent and redraws at
// most once per animation frame, and not while the page is hidden, so a
// fast mesh never queues work in the browser (the server itself sends at
// most two states a second).
"use strict";

const SVG = "http://www.w3.org/2000/svg";
let latest = null;
let drawn = null;
let scheduled = false;
let updates = 0;

// ?bench=N redraws the first state N times, every member's clock moved on
// at each, and records the mean time of a redraw (data-bench-ms): what a
// state costs the page, for the figures in the README.
const bench = Number(new URLSearchParams(location.search).get("bench")) || 0;

function runBench(state) {
  let total = 0;
  for (let k = 1; k <= bench; k++) {
    const s = JSON.parse(JSON.stringify(state));
    for (const m of s.members) m.clock += k;
    for (const r of s.vector_clock.rows) { r.clock += k; r.clocks = r.clocks.map((c) => c + k); }
    const t = performance.now();
    draw(s);
    if (k > 1) total += performance.now() - t; // the first draw is cold
  }
  document.body.dataset.benchMs = (total / Math.max(bench - 1, 1)).toFixed(1);
}

function accept(state) {
  latest = state;
  updates++;
  if (bench && updates === 1) {
    runBench(state);
    return;
  }
  if (maxEvents) {
    // A snapshot: draw now, not at a frame a headless browser may never
    // give.
    drawn = latest;
    draw(drawn);
    return;
  }
  schedule();
}

function schedule() {
  if (scheduled || document.visibilityState === "hidden") return;
  scheduled = true;
  requestAnimationFrame(() => {
    scheduled = false;
    if (latest !== drawn) {
      drawn = latest;
      draw(drawn);
    }
  });
}

document.addEventListener("visibilitychange", schedule);

// ?events=N draws only what the event stream sends, and leaves it after N
// events, so that a headless browser, which waits for the network to go
// quiet, takes a snapshot of what the stream delivered.
const maxEvents = Number(new URLSearchParams(location.search).get("events")) || 0;
let events = 0;

function connect() {
  if (!maxEvents) {
    fetch("api/state", { cache: "no-store" })
      .then((r) => (r.ok ? r.json() : null))
      .then((s) => { if (s) accept(s); })
      .catch(() => {});
  }
  const es = new EventSource("api/events");
  const conn = document.getElementById("conn");
  es.onopen = () => { conn.textContent = "live"; conn.className = "pill on"; };
  es.onmessage = (ev) => {
    events++;
    if (maxEvents && events >= maxEvents) es.close();
    accept(JSON.parse(ev.data));
  };
  es.onerror = () => {
    conn.textContent = latest && latest.done ? "run over; server gone" : "disconnected, retrying";
    conn.className = "pill off";
  };
}

// ---- formatting ----

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

function bytes(b) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (b >= 1024 && i < units.length - 1) { b /= 1024; i++; }
  return i === 0 ? b.toFixed(0) + " B" : b.toFixed(1) + " " + units[i];
}

function fixed(v, d) { return v === undefined || v === null ? "–" : Number(v).toFixed(d); }

function shortID(id) {
  const [peer, inc] = String(id).split("/");
  return "…" + peer.slice(-6) + (inc ? "/" + inc.slice(-4) : "");
}

function el(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  return e;
}

// ---- drawing ----

function draw(s) {
  const t0 = performance.now();
  const names = new Map(s.members.map((m) => [m.id, m.name || shortID(m.id)]));
  const name = (id) => names.get(id) || shortID(id);
  const parts = [];
  const timed = (label, f) => { const t = performance.now(); f(); parts.push(label + " " + (performance.now() - t).toFixed(1)); };
  timed("header", () => drawHeader(s));
  timed("members", () => drawMembers(s, name));
  timed("graph", () => drawGraph(s));
  timed("clocks", () => drawClocks(s, name));
  timed("curves", () => {
    drawCurve(document.getElementById("curve-time"), s.curve, "wall_seconds", (v) => v.toFixed(1) + " s");
    drawCurve(document.getElementById("curve-bytes"), s.curve, "bytes_sent", bytes);
  });
  timed("links", () => drawLinks(s, name));
  timed("rejected", () => drawRejected(s));
  document.body.dataset.drawParts = parts.join(", ");
  document.body.dataset.members = String(s.members.length);
  document.body.dataset.curvePoints = String(s.curve.length);
  document.body.dataset.updates = String(updates);
  document.body.dataset.events = String(events);
  // What a redraw costs, for the figures in the README.
  document.body.dataset.drawMs = (performance.now() - t0).toFixed(1);
}

function drawHeader(s) {
  const mode = document.getElementById("mode");
  mode.textContent = s.mode === "run" ? "run: " + shortID(s.self) : "testnet";
  const clocks = s.members.filter((m) => m.observed).map((m) => m.clock);
  const lo = clocks.length ? Math.min(...clocks) : 0;
  const hi = clocks.length ? Math.max(...clocks) : 0;
  const of = s.iterations ? "/" + s.iterations : "";
  document.getElementById("progress").textContent =
    "clock " + (lo === hi ? hi : lo + "–" + hi) + of + ", staleness bound " + s.staleness + ", " + s.elapsed_seconds.toFixed(1) + " s";
  if (s.done) {
    const conn = document.getElementById("conn");
    conn.textContent = "run over";
    conn.className = "pill done";
  }
}

function drawMembers(s, name) {
  const counts = {};
  const rows = s.members.map((m) => {
    counts[m.state] = (counts[m.state] || 0) + 1;
    const wait = (m.waiting_for || []).map(name).join(", ");
    const cls = m.id === s.self ? ' class="self"' : "";
    const obs = m.observed;
    return `<tr data-member="${esc(m.id)}" data-state="${esc(m.state)}"${cls}>` +
      `<td class="id" title="${esc(m.id)}">${esc(m.name || shortID(m.id))}</td>` +
      `<td>${m.incarnation || ""}</td>` +
      `<td class="state-${esc(m.state)}">${esc(m.state)}</td>` +
      `<td>${m.clock}</td><td>${esc(m.path || "–")}</td>` +
      `<td>${obs ? m.staleness_max + " / " + fixed(m.staleness_mean, 2) : "–"}</td>` +
      `<td>${obs ? fixed(m.blocked_seconds, 1) + " s" : "–"}</td>` +
      `<td>${obs ? bytes(m.bytes_sent) : "–"}</td><td>${obs ? bytes(m.bytes_received) : "–"}</td>` +
      `<td>${obs && m.compression_ratio ? fixed(m.compression_ratio, 2) + "×" : "–"}</td>` +
      `<td>${obs ? fixed(m.train_loss, 4) : "–"}</td>` +
      `<td class="wait">${esc(wait)}</td></tr>`;
  });
  patchRows(document.querySelector("#members tbody"), rows);
  document.getElementById("member-summary").textContent =
    s.members.length + " members: " + Object.entries(counts).map(([k, v]) => v + " " + k).join(", ");
}

// patchRows replaces only the rows whose markup changed: between two
// states of a large mesh most rows stay as they were.
const rowMarkup = new WeakMap();

function patchRows(tbody, rows) {
  const old = tbody.rows;
  const keys = rowMarkup.get(tbody);
  if (!keys || old.length !== rows.length) {
    tbody.innerHTML = rows.join("");
  } else {
    const tmp = document.createElement("tbody");
    rows.forEach((html, i) => {
      if (keys[i] === html) return;
      tmp.innerHTML = html;
      tbody.replaceChild(tmp.firstChild, old[i]);
    });
  }
  rowMarkup.set(tbody, rows);
}

function drawGraph(s) {
  const svg = document.getElementById("graph");
  svg.replaceChildren();
  const n = s.members.length;
  if (!n) return;
  const c = 200, R = n <= 16 ? 150 : 175, r = Math.max(3, Math.min(10, 160 / n));
  const pos = new Map();
  s.members.forEach((m, i) => {
    const a = (2 * Math.PI * i) / n - Math.PI / 2;
    pos.set(m.id, [c + R * Math.cos(a), c + R * Math.sin(a)]);
  });
  // One line per pair of members: its traffic both ways, and the path the
  // side that knows it reports.
  const pairs = new Map();
  for (const l of s.links) {
    if (!pos.has(l.from) || !pos.has(l.to)) continue;
    const key = l.from < l.to ? l.from + " " + l.to : l.to + " " + l.from;
    const p = pairs.get(key) || { a: l.from, b: l.to, bytes: 0, path: "" };
    p.bytes += l.bytes_sent;
    if (!p.path || p.path === "unknown") p.path = l.path;
    pairs.set(key, p);
  }
  let most = 1;
  for (const p of pairs.values()) most = Math.max(most, p.bytes);
  const edges = el("g", {});
  for (const p of pairs.values()) {
    const [x1, y1] = pos.get(p.a), [x2, y2] = pos.get(p.b);
    const w = 0.6 + 4 * Math.log1p(p.bytes) / Math.log1p(most);
    const line = el("line", { x1, y1, x2, y2, class: "edge " + (p.path || "none"), "stroke-width": w.toFixed(2) });
    const t = el("title", {});
    t.textContent = p.path + ", " + bytes(p.bytes);
    line.appendChild(t);
    edges.appendChild(line);
  }
  svg.appendChild(edges);
  const nodes = el("g", {});
  for (const m of s.members) {
    const [x, y] = pos.get(m.id);
    const dot = el("circle", { cx: x, cy: y, r, class: "node " + m.state + (m.id === s.self ? " self" : ""), "data-member": m.id });
    const t = el("title", {});
    t.textContent = (m.name || m.id) + ": " + m.state + ", clock " + m.clock;
    dot.appendChild(t);
    nodes.appendChild(dot);
    if (n <= 16) {
      const label = el("text", { x: c + (x - c) * 1.16, y: c + (y - c) * 1.1 + 3, "text-anchor": "middle", "font-size": 10, fill: "#6b7482" });
      label.textContent = m.name || shortID(m.id);
      nodes.appendChild(label);
    }
  }
  svg.appendChild(nodes);
  svg.dataset.edges = String(pairs.size);
}

function drawClocks(s, name) {
  const canvas = document.getElementById("clocks");
  const vc = s.vector_clock;
  const cols = vc.origins.length, rows = vc.rows.length;
  const dpr = window.devicePixelRatio || 1;
  const size = 400;
  const label = cols <= 32 ? 46 : 0;
  const cw = (size - label) / Math.max(cols, 1);
  const ch = Math.min(cw * 1.0, (size - label) / Math.max(rows, 1));
  const height = label + ch * rows + 2;
  canvas.width = size * dpr;
  canvas.height = Math.max(40, height) * dpr;
  canvas.style.aspectRatio = size + " / " + Math.max(40, height);
  const g = canvas.getContext("2d");
  g.scale(dpr, dpr);
  g.clearRect(0, 0, size, height);
  g.font = "10px system-ui, sans-serif";
  const states = new Map(s.members.map((m) => [m.id, m.state]));
  if (label) {
    g.fillStyle = "#6b7482";
    vc.origins.forEach((o, j) => {
      g.save();
      g.translate(label + j * cw + cw / 2 + 3, label - 4);
      g.rotate(-Math.PI / 3);
      g.fillText(name(o).slice(0, 9), 0, 0);
      g.restore();
    });
  }
  // One pixel per cell, scaled up: a 64-node matrix is 4,096 cells, and a
  // rectangle each would cost more than the rest of the page.
  const cells = g.createImageData(Math.max(cols, 1), Math.max(rows, 1));
  const rgb = { live: [207, 238, 221], stale: [244, 227, 168], behind: [240, 169, 162], gone: [227, 230, 235] };
  vc.rows.forEach((row, i) => {
    row.clocks.forEach((c, j) => {
      const lag = row.clock > c ? row.clock - c : 0;
      const st = states.get(vc.origins[j]);
      const color = st && st !== "live" ? rgb.gone : lag === 0 ? rgb.live : lag <= s.staleness ? rgb.stale : rgb.behind;
      const k = 4 * (i * cols + j);
      cells.data[k] = color[0];
      cells.data[k + 1] = color[1];
      cells.data[k + 2] = color[2];
      cells.data[k + 3] = 255;
    });
  });
  const scratch = document.createElement("canvas");
  scratch.width = cells.width;
  scratch.height = cells.height;
  scratch.getContext("2d").putImageData(cells, 0, 0);
  g.imageSmoothingEnabled = false;
  g.drawImage(scratch, label, label, cw * cols, ch * rows);
  // Grid lines and, when the cells are large enough, the clocks.
  g.strokeStyle = "#ffffff";
  g.lineWidth = 1;
  if (cw >= 6) {
    g.beginPath();
    for (let j = 1; j < cols; j++) { g.moveTo(label + j * cw, label); g.lineTo(label + j * cw, label + ch * rows); }
    for (let i = 1; i < rows; i++) { g.moveTo(label, label + i * ch); g.lineTo(label + cw * cols, label + i * ch); }
    g.stroke();
  }
  vc.rows.forEach((row, i) => {
    const y = label + i * ch;
    if (label) {
      g.fillStyle = "#6b7482";
      g.fillText(name(row.holder).slice(0, 8), 0, y + ch / 2 + 3);
    }
    if (cw >= 22 && ch >= 12) {
      g.fillStyle = "#1d2430";
      row.clocks.forEach((c, j) => g.fillText(String(c), label + j * cw + 3, y + ch / 2 + 3));
    }
  });
  canvas.dataset.cells = String(cols * rows);
}

function drawCurve(svg, curve, xkey, xfmt) {
  svg.replaceChildren();
  const W = 400, H = 240, L = 40, R = 46, T = 8, B = 44;
  const pts = curve.filter((p) => Number.isFinite(p[xkey]));
  const xmax = Math.max(1e-9, ...pts.map((p) => p[xkey]));
  const lossMax = Math.max(1e-9, ...pts.map((p) => Math.max(p.test_loss || 0, p.train_loss || 0)));
  const X = (v) => L + ((W - L - R) * v) / xmax;
  const Yl = (v) => T + (H - T - B) * (1 - v / lossMax);
  const Yr = (v) => T + (H - T - B) * (1 - v);
  svg.appendChild(el("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" }));
  svg.appendChild(el("line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" }));
  svg.appendChild(el("line", { x1: W - R, y1: T, x2: W - R, y2: H - B, class: "axis" }));
  const text = (x, y, s, anchor) => {
    const t = el("text", { x, y, "text-anchor": anchor || "middle" });
    t.textContent = s;
    svg.appendChild(t);
  };
  text(L - 4, T + 8, lossMax.toPrecision(2), "end");
  text(L - 4, H - B, "0", "end");
  text(W - R + 4, T + 8, "1", "start");
  text(W - R + 4, H - B, "0", "start");
  text(L, H - B + 13, "0", "start");
  text(W - R, H - B + 13, xfmt(xmax), "end");
  text(L - 4, H / 2, "loss", "end");
  text(W - R + 4, H / 2, "acc/AUC", "start");
  const series = [
    ["train_loss", Yl, "train loss"], ["test_loss", Yl, "test loss"],
    ["test_accuracy", Yr, "accuracy"], ["test_auc", Yr, "AUC"],
  ];
  let lx = L + 6;
  for (const [key, Y, label] of series) {
    // Before the first iteration there is no mini-batch, so no train loss.
    const ps = pts.filter((p) => p[key] !== undefined && p[key] !== null && (key !== "train_loss" || p.iteration > 0));
    if (!ps.length) continue;
    const poly = el("polyline", {
      class: "series " + key,
      points: ps.map((p) => X(p[xkey]).toFixed(1) + "," + Y(p[key]).toFixed(1)).join(" "),
      "data-points": String(ps.length),
    });
    svg.appendChild(poly);
    svg.appendChild(el("line", { x1: lx, y1: H - 9, x2: lx + 14, y2: H - 9, class: "series " + key }));
    text(lx + 17, H - 6, label, "start");
    lx += 20 + label.length * 5.5;
  }
  svg.dataset.points = String(pts.length);
}

function drawLinks(s, name) {
  const links = s.links.filter((l) => l.path !== "unknown").slice().sort((a, b) => b.bytes_sent - a.bytes_sent);
  const shown = links.slice(0, 100);
  document.querySelector("#links tbody").innerHTML = shown.map((l) =>
    `<tr><td>${esc(name(l.from))}</td><td>${esc(name(l.to))}</td><td>${esc(l.path || "–")}</td>` +
    `<td>${bytes(l.bytes_sent)}</td><td>${bytes(l.bytes_received)}</td>` +
    `<td>${l.messages_sent} / ${l.messages_received}</td>` +
    `<td>${l.compression_ratio ? fixed(l.compression_ratio, 2) + "×" : "–"}</td></tr>`).join("");
  const byPath = {};
  for (const l of s.links) byPath[l.path || "idle"] = (byPath[l.path || "idle"] || 0) + 1;
  document.getElementById("link-summary").textContent =
    Object.entries(byPath).map(([k, v]) => v + " " + k).join(", ") + (links.length > shown.length ? "; the 100 busiest shown" : "");
}

function drawRejected(s) {
  const entries = Object.entries(s.rejected || {}).filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1]);
  document.querySelector("#rejected tbody").innerHTML = entries.length
    ? entries.map(([k, v]) => `<tr><td>${esc(k)}</td><td>${v}</td></tr>`).join("")
    : '<tr><td>none</td><td>0</td></tr>';
}

connect();
