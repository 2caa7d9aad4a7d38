// Usage and estimated cost (GET /api/usage, as `paddock usage`): a table
// per session and a chart of tokens per hour over the last two days, drawn
// as plain inline SVG. On the list it covers every session shown there; on
// a session's page, that session. Uses $, call and cell from app.js.
"use strict";

const usageHours = 48;
const svgNS = "http://www.w3.org/2000/svg";

function usageName() {
  const m = location.hash.match(/^#\/s\/([^/]+)/);
  return m ? decodeURIComponent(m[1]) : "";
}

function usageQuery(name, extra) {
  const q = new URLSearchParams(extra);
  if (name) q.set("session", name);
  else if ($("#allUsers").checked) q.set("all_users", "1");
  return "/api/usage?" + q.toString();
}

const costText = (c) => (c === null || c === undefined ? "unknown" : "$" + c.toFixed(4));
const num = (n) => (n || 0).toLocaleString();

function usageTable(rep) {
  const t = document.createElement("table"); t.className = "usageTable";
  const head = t.createTHead().insertRow();
  for (const h of ["session", "requests", "input", "output", "cache read", "cache write", "est. cost"]) {
    const th = document.createElement("th"); th.textContent = h; head.appendChild(th);
  }
  const tb = t.createTBody();
  const row = (r, label) => {
    const tr = tb.insertRow(); if (label) tr.className = "total";
    cell(tr, label || r.key); cell(tr, num(r.requests)); cell(tr, num(r.input_tokens)); cell(tr, num(r.output_tokens));
    cell(tr, num(r.cache_read_tokens)); cell(tr, num(r.cache_creation_tokens)); cell(tr, costText(r.cost_usd)).className = "cost";
  };
  for (const r of rep.rows) row(r);
  if (rep.rows.length !== 1) row(rep.total, "total");
  return t;
}

// usageChart draws one bar per UTC hour of the last usageHours hours:
// every kind of token of that hour, its numbers in each bar's tooltip.
function usageChart(rep, now) {
  const w = 720, h = 140, left = 56, bottom = 20, top = 8;
  const end = Math.floor(now / 3600e3) * 3600e3;
  const byHour = new Map(rep.rows.map((r) => [r.key, r]));
  const bars = [];
  for (let i = usageHours - 1; i >= 0; i--) {
    const t = new Date(end - i * 3600e3);
    const key = t.toISOString().slice(0, 13) + ":00Z";
    const r = byHour.get(key);
    const total = r ? r.input_tokens + r.output_tokens + r.cache_read_tokens + r.cache_creation_tokens : 0;
    bars.push({ t, r, total });
  }
  const max = Math.max(1, ...bars.map((b) => b.total));
  const svg = document.createElementNS(svgNS, "svg");
  svg.setAttribute("viewBox", "0 0 " + w + " " + h); svg.setAttribute("class", "usageChart");
  svg.setAttribute("role", "img"); svg.setAttribute("aria-label", "tokens per hour, last " + usageHours + " hours");
  const el = (name, attrs, text) => {
    const e = document.createElementNS(svgNS, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    svg.appendChild(e); return e;
  };
  const plotH = h - top - bottom, bw = (w - left) / usageHours;
  el("line", { x1: left, y1: top + plotH, x2: w, y2: top + plotH, class: "axis" });
  el("text", { x: left - 4, y: top + 10, "text-anchor": "end" }, num(max));
  el("text", { x: left - 4, y: top + plotH, "text-anchor": "end" }, "0");
  bars.forEach((b, i) => {
    if (b.total > 0) {
      const bh = Math.max(1, (b.total / max) * plotH);
      const rect = el("rect", { x: left + i * bw + 1, y: top + plotH - bh, width: Math.max(1, bw - 2), height: bh, class: "bar" });
      const tip = document.createElementNS(svgNS, "title");
      tip.textContent = b.t.toLocaleString() + ": " + num(b.total) + " tokens (in " + num(b.r.input_tokens) + ", out " + num(b.r.output_tokens) +
        ", cache read " + num(b.r.cache_read_tokens) + ", cache write " + num(b.r.cache_creation_tokens) + "), " + costText(b.r.cost_usd);
      rect.appendChild(tip);
    }
    if (i % 12 === 0) el("text", { x: left + i * bw, y: h - 4 }, b.t.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }));
  });
  return svg;
}

async function showUsage() {
  const name = usageName();
  const box = name ? $("#usageOne") : $("#usageAll");
  if (!box) return;
  const now = Date.now();
  const since = new Date(Math.floor(now / 3600e3) * 3600e3 - (usageHours - 1) * 3600e3).toISOString().replace(/\.\d+Z$/, "Z");
  const [sum, hourly] = await Promise.all([
    call("GET", usageQuery(name, { by: "session" })),
    call("GET", usageQuery(name, { by: "hour", since })),
  ]);
  if (usageName() !== name) return; // the page moved on meanwhile
  box.textContent = "";
  const h = document.createElement("h2"); h.textContent = "Usage"; box.appendChild(h);
  box.appendChild(usageTable(sum));
  const ch = document.createElement("h3"); ch.textContent = "Tokens per hour (last " + usageHours + " hours)"; box.appendChild(ch);
  box.appendChild(usageChart(hourly, now));
  const note = document.createElement("p"); note.className = "note";
  note.textContent = "Costs are estimates at the list prices of " + sum.prices_as_of + " (the Runner's [prices])." +
    (sum.unpriced_models ? " Unknown cost: no price for " + sum.unpriced_models.join(", ") + "." : "");
  box.appendChild(note);
}

const refreshUsage = () => showUsage().catch(() => {});
window.addEventListener("hashchange", refreshUsage);
$("#allUsers").addEventListener("change", refreshUsage);
refreshUsage();
setInterval(refreshUsage, 5000);
