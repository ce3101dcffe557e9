// goroce live view: poll the server's JSON, redraw the page. No framework,
// no build step; everything on the page is built here with the DOM API
// (textContent, never innerHTML, so a name cannot inject markup).
"use strict";

// Okabe–Ito colours, one per flow (yellow left out: too pale on white);
// past seven flows the colours come round again with a dash pattern, so
// that no two of the first 21 flows look alike.
const FLOW_COLOURS = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#000000"];
const FLOW_DASHES = ["", "6 3", "2 2"];

// flowStyle is flow f's colour and dash pattern.
function flowStyle(f) {
  return {
    colour: FLOW_COLOURS[f % FLOW_COLOURS.length],
    dash: FLOW_DASHES[Math.floor(f / FLOW_COLOURS.length) % FLOW_DASHES.length],
  };
}
const SVG_NS = "http://www.w3.org/2000/svg";

const view = {
  pollMs: 300,
  counters: new Map(), // "device/counter" → {value, t}: the last refresh, for rates
  chart: { runId: -1, next: 0, run: null, samples: [] },
};

// ---- polling -------------------------------------------------------------

async function getJSON(url) {
  const resp = await fetch(url, { cache: "no-store" });
  if (!resp.ok) throw new Error(url + ": HTTP " + resp.status);
  return resp.json();
}

async function refresh() {
  try {
    const [devs, dc] = await Promise.all([
      getJSON("api/devices"),
      getJSON("api/dcqcn?after=" + view.chart.next),
    ]);
    view.pollMs = devs.poll_ms || view.pollMs;
    document.getElementById("title").textContent = devs.title;
    renderDevices(devs.devices || [], performance.now());
    if (updateChart(dc)) renderChart();
    if (dc.ended) {
      setStatus("done", "run finished · showing its data · checked " + new Date().toLocaleTimeString());
    } else {
      setStatus("live", "live · updated " + new Date().toLocaleTimeString());
    }
    setTimeout(refresh, view.pollMs);
  } catch (err) {
    setStatus("stopped", "no answer from goroce (the process may have exited): showing the last data");
    setTimeout(refresh, Math.max(view.pollMs, 2000)); // try again, less often
  }
}

function setStatus(kind, text) {
  const s = document.getElementById("status");
  s.className = "status " + kind;
  s.textContent = text;
}

// ---- small helpers -------------------------------------------------------

// el builds an element: el("td", {class: "psn"}, "0x1234").
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c);
  return e;
}

// svg builds an SVG element.
function svg(tag, attrs) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

// hex prints a QPN or PSN as --trace does: 0x001a2b.
function hex(n) {
  return "0x" + n.toString(16).padStart(4, "0");
}

function num(n) {
  return n.toLocaleString("en-US");
}

// short prints v with three significant digits (more left of the point),
// trailing zeros after the point dropped: 9.87, 12.5, 100, 0.2.
function short(v) {
  const digits = v >= 100 ? 0 : v >= 10 ? 1 : 2;
  let s = v.toFixed(digits);
  if (s.includes(".")) s = s.replace(/0+$/, "").replace(/\.$/, "");
  return s;
}

// rate prints bits per second: "9.87 Gb/s".
function rate(bps) {
  for (const [scale, unit] of [[1e9, "Gb/s"], [1e6, "Mb/s"], [1e3, "kb/s"]]) {
    if (bps >= scale) return short(bps / scale) + " " + unit;
  }
  return Math.round(bps) + " b/s";
}

// bytes prints a byte count: "64 kB".
function bytes(n) {
  if (n >= 1e6) return short(n / 1e6) + " MB";
  if (n >= 1e3) return short(n / 1e3) + " kB";
  return n + " B";
}

// ---- devices: QP table and counters -------------------------------------

function renderDevices(devices, now) {
  const root = document.getElementById("devices");
  root.replaceChildren(...devices.map((d) => deviceCard(d, now)));
  document.getElementById("no-devices").hidden = devices.length > 0 || view.chart.run !== null;
}

function deviceCard(d, now) {
  return el("section", { class: "card device", "data-name": d.name },
    el("h2", {}, d.name, el("span", { class: "meta" }, d.addr + " · GID " + d.gid)),
    qpTable(d.qps),
    counterGrid(d.name, d.counters, now));
}

const QP_COLUMNS = ["QPN", "type", "state", "dest QPN", "SQ PSN", "unacked PSN", "RQ PSN",
  "send WRs", "recv WRs", "MTU", "DCQCN rate"];

function qpTable(qps) {
  const head = el("tr", {}, ...QP_COLUMNS.map((c) => el("th", {}, c)));
  const rows = qps.map((q) => el("tr", { class: "qp", "data-qpn": q.qpn, "data-state": q.state },
    el("td", { class: "qpn", title: "QPN " + q.qpn }, hex(q.qpn)),
    el("td", { class: "type" }, q.type),
    el("td", { class: "state" }, el("span", { class: "badge state-" + q.state }, q.state)),
    el("td", { class: "qpn" }, q.type === "UD" ? "–" : hex(q.dest_qpn)),
    el("td", { class: "psn", title: "next PSN the requester sends" }, hex(q.sq_psn)),
    el("td", { class: "psn", title: "oldest PSN not yet acknowledged" }, q.type === "RC" ? hex(q.acked_psn) : "–"),
    el("td", { class: "psn", title: "PSN the responder expects next" }, hex(q.rq_psn)),
    el("td", { class: "send-wrs" }, num(q.send_wrs)),
    el("td", { class: "recv-wrs" }, num(q.recv_wrs)),
    el("td", {}, String(q.mtu)),
    el("td", { class: "rate", title: q.dcqcn ? "the reaction point's current rate" : "no DCQCN on this QP" },
      q.dcqcn ? rate(q.rate_bps) : "off")));
  if (rows.length === 0) {
    rows.push(el("tr", {}, el("td", { class: "none", colspan: QP_COLUMNS.length }, "no QPs")));
  }
  return el("table", { class: "qps" }, el("thead", {}, head), el("tbody", {}, ...rows));
}

function counterGrid(device, counters, now) {
  const cells = counters.map((c) => {
    const key = device + "/" + c.name;
    const prev = view.counters.get(key);
    view.counters.set(key, { value: c.value, t: now });
    const delta = prev ? c.value - prev.value : 0;
    const perSec = prev && now > prev.t ? delta / ((now - prev.t) / 1000) : 0;
    let cls = "counter";
    if (c.value === 0) cls += " zero";
    if (delta > 0) cls += " changed";
    return el("div", { class: cls, "data-name": c.name, "data-value": c.value },
      el("span", { class: "name", title: c.name }, c.name),
      el("span", { class: "rate" }, delta > 0 ? "+" + num(Math.round(perSec)) + "/s" : ""),
      el("span", { class: "value" }, num(c.value)));
  });
  return el("div", { class: "counters" }, ...cells);
}

// ---- DCQCN chart ---------------------------------------------------------

// updateChart merges an /api/dcqcn answer; it reports whether anything
// changed.
function updateChart(dc) {
  const c = view.chart;
  if (dc.run_id !== c.runId || dc.next < c.next) {
    // A new run, or a new server: start over (the next poll fetches it all).
    const restart = c.runId !== -1;
    Object.assign(c, { runId: dc.run_id, next: 0, run: dc.run, samples: [] });
    if (restart) return true;
  }
  const fresh = dc.samples || [];
  c.samples.push(...fresh);
  if (c.samples.length > 8192) c.samples.splice(0, c.samples.length - 8192);
  c.next = dc.next;
  c.run = dc.run;
  return fresh.length > 0 || c.samples.length === 0;
}

function renderChart() {
  const c = view.chart;
  const section = document.getElementById("dcqcn");
  section.hidden = c.run === null && c.samples.length === 0;
  if (section.hidden) return;
  document.getElementById("no-devices").hidden = true;

  const last = c.samples[c.samples.length - 1];
  const flows = Math.max(c.run ? c.run.flows : 0, last ? last.rate_bps.length : 0);
  const run = c.run || { name: "", line_rate_bps: 0, duration_ms: 0, buffer_bytes: 0, preset: "" };
  document.getElementById("run").textContent = [run.name, flows + (flows === 1 ? " flow" : " flows"),
    run.line_rate_bps ? rate(run.line_rate_bps) + " links" : "", run.preset ? "preset " + run.preset : ""]
    .filter(Boolean).join(" · ");

  // Time from 0 to the run's length; rates from 0 to a round value above
  // the fastest flow (at most the line rate, which no reaction point
  // passes), so that sixteen flows at 0.6 Gb/s on 10 Gb/s links are not
  // squashed into the bottom of the chart; the queue from 0 to its
  // deepest or to Kmax, whichever is more.
  const xMax = Math.max(run.duration_ms, last ? last.at_ms : 0, 1);
  let rateMax = 0;
  let queueMax = 0;
  for (const s of c.samples) {
    for (const r of s.rate_bps) rateMax = Math.max(rateMax, r);
    queueMax = Math.max(queueMax, s.queue_max_bytes, s.queue_bytes);
  }
  const queueTop = Math.max(queueMax, run.kmax_bytes || 0);
  const bufferShown = run.buffer_bytes > 0 && run.buffer_bytes <= 1.5 * queueTop;

  // Rates: one line per flow.
  const rateSeries = [];
  for (let f = 0; f < flows; f++) {
    const st = flowStyle(f);
    rateSeries.push({
      cls: "flow-line", flow: f, colour: st.colour, dash: st.dash,
      points: c.samples.filter((s) => f < s.rate_bps.length).map((s) => [s.at_ms, s.rate_bps[f]]),
    });
  }
  drawChart(document.getElementById("rate-chart"), {
    xMax, yTop: run.line_rate_bps ? Math.min(niceCeil(rateMax), niceCeil(run.line_rate_bps)) : niceCeil(rateMax),
    yFormat: rate, series: rateSeries,
  });

  // Queue: the depth at each sample, filled, and the buffer if it matters.
  // Kmin and Kmax, where RED starts and stops marking, and the buffer.
  const queuePoints = c.samples.map((s) => [s.at_ms, s.queue_bytes]);
  const hlines = [];
  if (run.kmin_bytes > 0) hlines.push({ cls: "kmin-line", y: run.kmin_bytes, label: "Kmin " + bytes(run.kmin_bytes) });
  if (run.kmax_bytes > 0) hlines.push({ cls: "kmax-line", y: run.kmax_bytes, label: "Kmax " + bytes(run.kmax_bytes) });
  if (bufferShown) hlines.push({ cls: "buffer-line", y: run.buffer_bytes, label: "buffer " + bytes(run.buffer_bytes) });
  drawChart(document.getElementById("queue-chart"), {
    xMax, yTop: niceCeil(Math.max(queueTop, bufferShown ? run.buffer_bytes : 0, 1000)), yFormat: bytes,
    series: [{ cls: "queue-line", points: queuePoints, area: true }],
    hlines,
  });

  // Legend with each flow's latest rate, and the running totals.
  document.getElementById("legend").replaceChildren(...rateSeries.map((s) =>
    el("li", { "data-flow": s.flow },
      swatch(s.colour, s.dash),
      "flow " + s.flow + (last && s.flow < last.rate_bps.length ? " · " + rate(last.rate_bps[s.flow]) +
        " (delivering " + rate(last.throughput_bps[s.flow] || 0) + ")" : ""))));
  const totals = last ? [["time", (last.at_ms / 1000).toFixed(3) + " s"], ["queue", bytes(last.queue_bytes)],
    ["CE marked", num(last.marked)], ["CNPs", num(last.cnps)], ["tail drops", num(last.tail_drops)],
    ["retransmitted", num(last.retransmitted)]] : [];
  document.getElementById("totals").replaceChildren(...totals.flatMap(([k, v]) =>
    [el("dt", {}, k), el("dd", {}, v)]));
}

// swatch is a legend's colour sample. The colour goes through the CSSOM:
// the page's Content-Security-Policy refuses inline style attributes.
// A dashed flow's swatch is striped the same way.
function swatch(colour, dash) {
  const e = el("span", { class: "swatch" + (dash ? " dashed" : "") });
  e.style.background = colour;
  if (dash) e.style.borderColor = colour;
  return e;
}

// Chart geometry, in viewBox units.
const BOX = { w: 560, h: 250, left: 62, right: 12, top: 10, bottom: 26 };

// drawChart redraws an SVG chart: grid, axes with labels, and each series
// as a polyline (time in ms on x, from 0 to xMax; y from 0 to yTop, higher
// values drawn at the top).
function drawChart(root, { xMax, yTop, yFormat, series, hlines }) {
  const pw = BOX.w - BOX.left - BOX.right;
  const ph = BOX.h - BOX.top - BOX.bottom;
  const x = (v) => (BOX.left + (v / xMax) * pw).toFixed(1);
  const y = (v) => (BOX.top + ph - (Math.min(v, yTop) / yTop) * ph).toFixed(1);
  const parts = [];

  for (const v of ticks(yTop)) {
    parts.push(svg("line", { class: "grid", x1: BOX.left, x2: BOX.w - BOX.right, y1: y(v), y2: y(v) }));
    const label = svg("text", { x: BOX.left - 6, y: Number(y(v)) + 3, "text-anchor": "end" });
    label.textContent = yFormat(v);
    parts.push(label);
  }
  for (const v of ticks(niceCeil(xMax))) {
    if (v > xMax) break;
    // A label too near the right edge for its middle to sit under its
    // tick ends there instead: centred, "200 ms" would run off the chart.
    const anchor = BOX.w - Number(x(v)) < 24 ? "end" : "middle";
    const label = svg("text", { x: anchor === "end" ? BOX.w - 2 : x(v), y: BOX.h - 8, "text-anchor": anchor });
    label.textContent = v >= 1000 || xMax >= 2000 ? (v / 1000) + " s" : v + " ms";
    parts.push(label);
  }
  parts.push(svg("line", { class: "axis", x1: BOX.left, x2: BOX.left, y1: BOX.top, y2: BOX.top + ph }));
  parts.push(svg("line", { class: "axis", x1: BOX.left, x2: BOX.w - BOX.right, y1: BOX.top + ph, y2: BOX.top + ph }));

  for (const s of series) {
    const pts = s.points.map(([px, py]) => x(px) + "," + y(py));
    if (s.area && pts.length > 1) {
      const base = y(0);
      const first = x(s.points[0][0]);
      const lastX = x(s.points[s.points.length - 1][0]);
      parts.push(svg("polygon", { class: "queue-area", points: first + "," + base + " " + pts.join(" ") + " " + lastX + "," + base }));
    }
    const attrs = { class: s.cls, points: pts.join(" "), "data-points": pts.length };
    if (s.colour) attrs.stroke = s.colour;
    if (s.dash) attrs["stroke-dasharray"] = s.dash;
    if (s.flow !== undefined) attrs["data-flow"] = s.flow;
    parts.push(svg("polyline", attrs));
  }
  for (const h of hlines || []) {
    parts.push(svg("line", { class: h.cls, x1: BOX.left, x2: BOX.w - BOX.right, y1: y(h.y), y2: y(h.y), "data-y": h.y }));
    const label = svg("text", { class: h.cls + "-label", x: BOX.w - BOX.right - 4, y: Number(y(h.y)) - 4, "text-anchor": "end" });
    label.textContent = h.label;
    parts.push(label);
  }
  root.replaceChildren(...parts);
}

// niceCeil rounds v up to 1, 2, 2.5 or 5 times a power of ten.
function niceCeil(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) {
    if (m * p >= v * 0.999999) return m * p;
  }
  return 10 * p;
}

// ticks returns 0 and four or five evenly spaced round values up to top.
function ticks(top) {
  const step = niceCeil(top / 5);
  const out = [];
  for (let i = 0; i * step <= top * 1.000001; i++) out.push(i * step);
  return out;
}

refresh();
