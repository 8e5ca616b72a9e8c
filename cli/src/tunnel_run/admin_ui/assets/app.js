// mcpwire's admin UI: plain JavaScript, no framework, no build step. Data is written with
// textContent only (never as HTML); every request goes to this page's own origin.
"use strict";

const TOKEN = document.querySelector('meta[name="mcpwire-admin-token"]').content;
const MAX_ROWS = 1000;
const LEVELS = ["debug", "info", "warn", "error"];
const COLORS = { completed: "#157f3b", failed: "#b42318", expired: "#b54708", delivery_failed: "#7a2e0e",
  already_fulfilled: "#2f5fd0", skipped: "#667085", p50: "#2f5fd0", p95: "#b54708", p99: "#b42318",
  in_flight: "#2f5fd0", queued: "#b54708", forwards: "#157f3b" };

const $ = (id) => document.getElementById(id);
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function time(ms) { return new Date(ms).toLocaleTimeString(); }
function facts(dl, pairs) {
  dl.replaceChildren();
  for (const [k, v] of pairs) { dl.append(el("dt", k), el("dd", v === null || v === undefined ? "–" : v)); }
}
async function getJSON(path) {
  const r = await fetch(path, { credentials: "same-origin", cache: "no-store" });
  if (!r.ok) throw new Error(path + ": " + r.status);
  return r.json();
}
async function post(path, body) {
  return fetch(path, { method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-Mcpwire-Admin-Token": TOKEN },
    body: JSON.stringify(body || {}) });
}

// Panels -----------------------------------------------------------------------------------
for (const b of document.querySelectorAll("nav button")) {
  b.addEventListener("click", () => {
    for (const x of document.querySelectorAll("nav button")) x.classList.toggle("active", x === b);
    for (const p of document.querySelectorAll(".panel")) p.classList.toggle("active", p.id === b.dataset.panel);
    if (b.dataset.panel === "metrics") refreshMetrics();
    if (b.dataset.panel === "harpoon") refreshHarpoon();
  });
}

// Overview ---------------------------------------------------------------------------------
function uptime(s) {
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  return (h ? h + "h " : "") + (h || m ? m + "m " : "") + (s % 60) + "s";
}
async function refreshOverview() {
  let o;
  try { o = await getJSON("/admin/api/overview"); } catch (e) { $("ready-badge").textContent = "unreachable"; return; }
  const badge = $("ready-badge");
  badge.textContent = o.ready ? "ready" : "not ready";
  badge.className = "badge " + (o.ready ? "ok" : "bad");
  $("tunnel-id").textContent = o.tunnel_id;
  facts($("client-facts"), [["Instance", o.instance_id], ["Client version", o.client_version],
    ["Wire version", o.wire_version], ["Tunnel id", o.tunnel_id], ["Driver", o.driver],
    ["Uptime", uptime(o.uptime_seconds)], ["Log level", o.log_level], ["Health listener", o.health_listener]]);
  facts($("ready-facts"), [["Ready", o.ready ? "yes" : "no"], ["Why not", o.not_ready_reason],
    ["cloudflared", o.cloudflared || "not used"]]);
  const cp = o.control_plane;
  const kinds = Object.entries(cp.poll_errors_by_kind).map(([k, n]) => k + ": " + n).join(", ");
  facts($("poll-facts"), [["Host", o.control_plane_host], ["Polls", cp.polls], ["Failed polls", cp.poll_errors],
    ["Errors by kind", kinds || "none"],
    ["Last success", cp.last_successful_poll_unix ? time(cp.last_successful_poll_unix * 1000) : "never"],
    ["Backoff", cp.backoff_ms === null ? "none" : cp.backoff_ms + " ms"]]);
  const l = o.load;
  facts($("load-facts"), [["In flight", l.in_flight + " / " + l.queue_capacity], ["Queued", l.queued],
    ["Forwards", l.forwards_in_flight + " / " + l.worker_capacity], ["Response POSTs", l.posts_in_flight],
    ["Finished", Object.entries(o.commands).map(([k, n]) => k + ": " + n).join(", ") || "none"]]);
  const body = $("channels").tBodies[0];
  body.replaceChildren();
  for (const c of o.channels) {
    const tr = el("tr");
    tr.append(el("td", c.channel), el("td", c.binding + (c.unix_socket ? " (unix socket)" : "")), el("td", c.target));
    tr.dataset.channel = c.channel;
    body.append(tr);
    addOption($("filter-channel"), c.channel);
  }
  $("server-info").textContent = o.server_info_header || "–";
  if (!levelShown) { $("set-level").value = o.log_level; levelShown = true; }
}
let levelShown = false;

// Commands ---------------------------------------------------------------------------------
const commands = [];
function addOption(select, value) {
  if (![...select.options].some((o) => o.value === value)) select.append(new Option(value, value));
}
function commandRow(c) {
  const tr = el("tr");
  tr.dataset.outcome = c.outcome;
  tr.dataset.channel = c.channel;
  tr.dataset.requestId = c.request_id;
  tr.append(el("td", time(c.at_unix_ms)), el("td", c.request_id, "wrap"), el("td", c.channel), el("td", c.method),
    el("td", c.outcome, "outcome-" + c.outcome), el("td", c.resp_code), el("td", c.failure_source || ""),
    el("td", c.failure_kind || ""), el("td", c.duration_ms + " ms"), el("td", c.post_retries));
  return tr;
}
function applyCommandFilter() {
  let shown = 0;
  for (const tr of $("commands-table").tBodies[0].rows) {
    tr.hidden = !commandShown(tr);
    if (!tr.hidden) shown++;
  }
  $("commands-count").textContent = shown + " of " + commands.length + " recent commands";
}
function commandShown(tr) {
  const outcome = $("filter-outcome").value, channel = $("filter-channel").value;
  return (!outcome || tr.dataset.outcome === outcome) && (!channel || tr.dataset.channel === channel);
}
function addCommand(c) {
  commands.push(c);
  const body = $("commands-table").tBodies[0];
  const tr = commandRow(c);
  tr.hidden = !commandShown(tr);
  body.prepend(tr);
  while (commands.length > MAX_ROWS) { commands.shift(); body.lastElementChild.remove(); }
  addOption($("filter-outcome"), c.outcome);
  addOption($("filter-channel"), c.channel);
  let shown = 0;
  for (const row of body.rows) if (!row.hidden) shown++;
  $("commands-count").textContent = shown + " of " + commands.length + " recent commands";
}
$("filter-outcome").addEventListener("change", applyCommandFilter);
$("filter-channel").addEventListener("change", applyCommandFilter);

// Logs -------------------------------------------------------------------------------------
let logCount = 0;
function logLine(l) {
  const fields = Object.entries(l.fields).map(([k, v]) => k + "=" + (/[\s"=]/.test(v) || v === "" ? JSON.stringify(v) : v)).join(" ");
  const div = el("div", new Date(l.at_unix_ms).toISOString() + " " + l.level.toUpperCase().padEnd(5) + " " + l.msg + (fields ? " " + fields : ""), "l-" + l.level);
  div.dataset.level = l.level;
  return div;
}
function applyLevelFilter() {
  const min = LEVELS.indexOf($("filter-level").value);
  for (const d of $("log-lines").children) d.hidden = LEVELS.indexOf(d.dataset.level) < min;
}
function addLog(l) {
  const box = $("log-lines");
  const atEnd = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
  const d = logLine(l);
  d.hidden = LEVELS.indexOf(l.level) < LEVELS.indexOf($("filter-level").value);
  box.append(d);
  logCount++;
  while (box.children.length > 2000) box.firstElementChild.remove();
  if (atEnd) box.scrollTop = box.scrollHeight;
}
$("filter-level").addEventListener("change", applyLevelFilter);
$("apply-level").addEventListener("click", async () => {
  const r = await post("/admin/api/log-level", { level: $("set-level").value });
  const text = r.ok ? "log level is now " + (await r.json()).level : "refused: " + (await r.text());
  $("logs-status").textContent = text;
  refreshOverview();
});
$("bundle").addEventListener("click", async () => {
  const r = await post("/admin/api/bundle");
  if (!r.ok) { $("logs-status").textContent = "bundle refused: " + (await r.text()); return; }
  const blob = await r.blob();
  const a = el("a");
  a.href = URL.createObjectURL(blob);
  a.download = (r.headers.get("Content-Disposition") || "").split("filename=")[1]?.replaceAll('"', "") || "mcpwire-diagnostics.json";
  document.body.append(a);
  a.click();
  a.remove();
  $("logs-status").textContent = "bundle downloaded";
});

// Live streams -----------------------------------------------------------------------------
// EventSource reconnects by itself (with Last-Event-ID); when the server refuses a stream (a
// 503 when too many are open) it gives up, so the page opens it again from the last event it
// saw. Ids are "<process epoch>-<number>": a restarted client starts over.
function follow(path, event, onItem, onMissed) {
  let last = null;
  const open = () => {
    let url = path;
    if (last) {
      const [epoch, seq] = last.split("-");
      url += "?after=" + encodeURIComponent(seq) + "&epoch=" + encodeURIComponent(epoch);
    }
    const source = new EventSource(url);
    source.addEventListener(event, (e) => { last = e.lastEventId || last; onItem(JSON.parse(e.data)); });
    source.addEventListener("missed", (e) => onMissed(JSON.parse(e.data).count));
    source.addEventListener("error", () => {
      if (source.readyState === EventSource.CLOSED) setTimeout(open, 2000);
    });
  };
  open();
}

// Metrics ----------------------------------------------------------------------------------
function drawChart(svg, legend, series) {
  const NS = "http://www.w3.org/2000/svg";
  svg.replaceChildren();
  legend.replaceChildren();
  let max = 0, n = 0;
  for (const s of series) { n = Math.max(n, s.values.length); for (const v of s.values) if (v !== null) max = Math.max(max, v); }
  legend.append(el("span", "peak " + (Number.isInteger(max) ? max : max.toFixed(2)), "muted peak"));
  max = max > 0 ? max * 1.1 : 1;
  for (const s of series) {
    const pts = [];
    s.values.forEach((v, i) => { if (v !== null) pts.push(((i / Math.max(n - 1, 1)) * 600).toFixed(1) + "," + (158 - (v / max) * 150).toFixed(1)); });
    const line = document.createElementNS(NS, "polyline");
    line.setAttribute("points", pts.join(" "));
    line.setAttribute("fill", "none");
    line.setAttribute("stroke", s.color);
    line.setAttribute("stroke-width", "1.5");
    line.setAttribute("vector-effect", "non-scaling-stroke");
    svg.append(line);
    const key = el("span", s.name);
    key.style.setProperty("--c", s.color);
    legend.append(key);
  }
}
async function refreshMetrics() {
  if (!$("metrics").classList.contains("active")) return;
  let m;
  try { m = await getJSON("/admin/api/metrics"); } catch (e) { return; }
  const pts = m.points;
  const outcomes = new Set();
  for (const p of pts) for (const k of Object.keys(p.commands_per_second)) outcomes.add(k);
  if (!outcomes.size) outcomes.add("completed");
  drawChart($("chart-rates"), $("legend-rates"), [...outcomes].map((k) => ({ name: k, color: COLORS[k] || "#444",
    values: pts.map((p) => p.commands_per_second[k] || 0) })));
  drawChart($("chart-added"), $("legend-added"), ["p50", "p95", "p99"].map((k) => ({ name: k, color: COLORS[k],
    values: pts.map((p) => p.added_latency_ms[k]) })));
  drawChart($("chart-latency"), $("legend-latency"), ["p50", "p95", "p99"].map((k) => ({ name: k, color: COLORS[k],
    values: pts.map((p) => p.latency_ms[k]) })));
  drawChart($("chart-load"), $("legend-load"), ["in_flight", "queued", "forwards"].map((k) => ({ name: k.replace("_", " "),
    color: COLORS[k], values: pts.map((p) => p[k]) })));
}

// Harpoon ----------------------------------------------------------------------------------
async function refreshHarpoon() {
  let h;
  try { h = await getJSON("/admin/api/harpoon"); } catch (e) { return; }
  const targets = $("harpoon-targets").tBodies[0];
  targets.replaceChildren();
  const head = $("harpoon-targets").tHead.rows[0];
  if (h.targets.some((t) => t.url) && head.cells.length === 4) head.append(el("th", "URL"));
  for (const t of h.targets) {
    const tr = el("tr");
    tr.append(el("td", t.label), el("td", t.description, "wrap"), el("td", (t.tags || []).join(", ")), el("td", t.category));
    if (t.url) tr.append(el("td", t.url, "wrap"));
    targets.append(tr);
  }
  const calls = $("harpoon-calls").tBodies[0];
  calls.replaceChildren();
  for (const c of h.calls.items.slice().reverse()) {
    const tr = el("tr");
    tr.append(el("td", time(c.at_unix_ms)), el("td", c.label), el("td", c.status === null ? "–" : c.status),
      el("td", c.outcome), el("td", c.duration_ms + " ms"), el("td", c.response_bytes + " B"));
    calls.append(tr);
  }
}

// Start ------------------------------------------------------------------------------------
refreshOverview();
follow("/admin/events/commands", "command", addCommand, (n) => {
  $("commands-count").textContent = n + " older commands were dropped before they could be shown";
});
follow("/admin/events/logs", "log", addLog, (n) => {
  addLog({ at_unix_ms: Date.now(), level: "warn", msg: n + " log lines were dropped before they could be shown", fields: {} });
});
setInterval(refreshOverview, 2000);
setInterval(refreshMetrics, 2000);
setInterval(() => { if ($("harpoon").classList.contains("active")) refreshHarpoon(); }, 3000);
