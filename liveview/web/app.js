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

function accept(state) {
  latest = state;
  updates++;
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
  const names = new Map(s.members.map((m) => [m.id, m.name || shortID(m.id)]));
  const name = (id) => names.get(id) || shortID(id);
  drawHeader(s);
  drawMembers(s, name);
  drawGraph(s);
  drawClocks(s, name);
  drawCurve(document.getElementById("curve-time"), s.curve, "wall_seconds", (v) => v.toFixed(1) + " s");
  drawCurve(document.getElementById("curve-bytes"), s.curve, "bytes_sent", bytes);
  drawLinks(s, name);
  drawRejected(s);
  document.body.dataset.members = String(s.members.length);
  document.body.dataset.curvePoints = String(s.curve.length);
  document.body.dataset.updates = String(updates);
  document.body.dataset.events = String(events);
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
  document.querySelector("#members tbody").innerHTML = rows.join("");
  document.getElementById("member-summary").textContent =
    s.members.length + " members: " + Object.entries(counts).map(([k, v]) => v + " " + k).join(", ");
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
  vc.rows.forEach((row, i) => {
    const y = label + i * ch;
    if (label) {
      g.fillStyle = "#6b7482";
      g.fillText(name(row.holder).slice(0, 8), 0, y + ch / 2 + 3);
    }
    row.clocks.forEach((c, j) => {
      const lag = row.clock > c ? row.clock - c : 0;
      const st = states.get(vc.origins[j]);
      let color;
      if (st && st !== "live") color = "#e3e6eb";
      else if (lag === 0) color = "#cfeedd";
      else if (lag <= s.staleness) color = "#f4e3a8";
      else color = "#f0a9a2";
      g.fillStyle = color;
      g.fillRect(label + j * cw, y, Math.max(cw - 1, 1), Math.max(ch - 1, 1));
      if (cw >= 22 && ch >= 12) {
        g.fillStyle = "#1d2430";
        g.fillText(String(c), label + j * cw + 3, y + ch / 2 + 3);
      }
    });
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
