// paddock's web page: no framework, no inline script (the page's CSP forbids it).
"use strict";
const $ = (s) => document.querySelector(s);

// The page's key, the login's other half: the cookie alone is nothing (a
// browser sends it to every page on this host, whatever the port). The
// login's answer is this page with the key in a meta tag; it is kept in
// this origin's localStorage (no other port can read it, and every tab of
// this origin shares it) and sent on every API request and terminal socket.
const KEY = "paddock-key";
{
  const m = document.querySelector('meta[name="paddock-key"]');
  if (m && m.content) localStorage.setItem(KEY, m.content);
  if (m) m.remove();
  if (location.pathname === "/login") history.replaceState(null, "", "/" + location.hash); // the used login URL leaves the address bar
}
const key = () => localStorage.getItem(KEY) || "";

// loggedOut replaces the page with what the Runner said, and forgets the key.
function loggedOut(text) {
  localStorage.removeItem(KEY);
  if (typeof stopEvents === "function") stopEvents(); // live.js
  closeSession();
  document.body.textContent = text;
}

async function call(method, path, body) {
  const r = await fetch(path, { method, headers: { "X-Paddock": "1", "X-Paddock-Key": key(), "Content-Type": "application/json" }, body: body ? JSON.stringify(body) : undefined });
  const text = await r.text();
  let j = {};
  try { j = JSON.parse(text); } catch (e) { /* a plain-text answer */ }
  if (r.status === 401) { loggedOut(text.trim() || "paddock: not logged in. Run `paddock web` on the Runner's host and open the one-time URL it prints."); throw new Error(text.trim()); }
  if (!r.ok) throw new Error(j.error || text.trim() || r.statusText);
  return j;
}

function cell(tr, text) { const td = document.createElement("td"); td.textContent = text; tr.appendChild(td); return td; }

// activityText mirrors paddock ls: "working 2m", "waiting 5s", "exited 1".
function activityText(s) {
  const a = s.activity || {};
  if (!a.state || (s.observed !== "running" && a.state !== "exited")) return "-";
  if (a.state === "exited") return "exited " + (a.signal || (a.exit_status === -1 ? "?" : String(a.exit_status || 0))) + (a.reason ? " (" + a.reason + ")" : "");
  if (a.state !== "working" && a.state !== "waiting") return a.state;
  const d = Math.max(0, Math.floor((Date.now() - new Date(a.since)) / 1000));
  return a.state + " " + (d < 60 ? d + "s" : d < 3600 ? Math.floor(d / 60) + "m" : Math.floor(d / 3600) + "h");
}

// NEEDS is what a session needs of a person (the Runner's needs_you), in words.
const NEEDS = { approval: "approve a connection", waiting: "waiting for you", exited: "claude exited" };

// me is who this browser's login is (GET /api/whoami); every request is
// made as them, and the Runner shows and allows only what their roles do.
let me = null;
const rank = { observer: 1, driver: 2, operator: 3, owner: 4, admin: 5 };
const atLeast = (role, min) => (rank[role] || 0) >= rank[min];

async function showList() {
  $("#list").hidden = false; $("#session").hidden = true; $("#where").textContent = "";
  if (!me) {
    me = await call("GET", "/api/whoami");
    $("#me").textContent = me.name + (me.admin ? " (admin)" : "");
    $("#allUsersLabel").hidden = !me.admin;
  }
  showLogin().catch(() => {});
  const rows = await call("GET", "/api/sessions" + ($("#allUsers").checked ? "?all_users=1" : ""));
  // The Runner sends the sessions that need a person first; the tab's
  // title counts them.
  const needy = rows.filter((s) => s.needs_you).length;
  document.title = (needy ? "(" + needy + ") " : "") + "paddock";
  const tb = $("#sessions tbody"); tb.textContent = "";
  for (const s of rows) {
    const tr = document.createElement("tr"); tr.dataset.name = s.name;
    if (s.needs_you) { tr.className = "needs needs-" + s.needs_you; tr.dataset.needs = s.needs_you; }
    const a = document.createElement("a"); a.href = "#/s/" + encodeURIComponent(s.name); a.textContent = s.name;
    const first = cell(tr, ""); first.appendChild(a);
    if (s.needs_you) { const b = document.createElement("span"); b.className = "badge"; b.textContent = NEEDS[s.needs_you] || s.needs_you; first.appendChild(b); }
    cell(tr, (s.owner && s.owner.name) || "-").className = "owner wide"; cell(tr, s.your_role || "-").className = "role wide";
    cell(tr, s.frozen ? "frozen" : s.observed); cell(tr, activityText(s)).className = "activity";
    for (const v of [s.backend, s.egress, s.model || "-", new Date(s.created).toLocaleString(), String(s.tokens_used)]) cell(tr, v).classList.add("wide");
    const act = cell(tr, "");
    const btn = (label, f) => { const b = document.createElement("button"); b.textContent = label; b.onclick = async () => { try { await f(); } catch (e) { alert(e.message); } showList(); }; act.appendChild(b); };
    btn("watch", async () => { location.hash = "#/s/" + encodeURIComponent(s.name) + "/observer"; });
    if (atLeast(s.your_role, "operator")) {
      if (s.observed === "running" && !s.frozen) {
        btn("freeze", () => call("POST", "/api/sessions/" + s.id + "/freeze"));
        btn("sleep", () => call("POST", "/api/sessions/" + s.id + "/sleep"));
      } else btn("wake", () => call("POST", "/api/sessions/" + s.id + "/wake"));
      btn("remove", () => confirm("Remove " + s.name + " and its volume?") ? call("DELETE", "/api/sessions/" + s.id) : null);
    }
    tb.appendChild(tr);
  }
}

$("#create").onsubmit = async (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target); const req = {};
  for (const [k, v] of f.entries()) if (v) req[k] = v;
  if (req.egress === "ask") { req.egress = "allowlist"; req.ask = true; } // each name waits for approval
  $("#createError").textContent = "creating…";
  try { await call("POST", "/api/sessions", req); $("#createError").textContent = ""; ev.target.reset(); }
  catch (e) { $("#createError").textContent = e.message; }
  showList();
};

let term = null, sock = null, logTimer = null;

// The open session page, for review.js: set by showSession, announced with
// a "paddock:session" event, and "paddock:close" when it closes.
let currentSession = null;

function closeSession() {
  if (currentSession) { currentSession = null; document.dispatchEvent(new Event("paddock:close")); }
  setCtrl(false);
  if (sock) { sock.close(); sock = null; }
  if (term) { term.dispose(); term = null; }
  if (logTimer) { clearInterval(logTimer); logTimer = null; }
}

async function showSession(name, asked) {
  $("#list").hidden = true; $("#session").hidden = false;
  // Drive only where the Runner lets this person: it refuses a driver
  // join without the right, so ask for what the role allows.
  const info = await call("GET", "/api/sessions/" + encodeURIComponent(name)).catch(() => ({}));
  const role = asked === "observer" || !atLeast(info.your_role, "driver") ? "observer" : "driver";
  $("#title").textContent = name; $("#where").textContent = "/ " + name;
  $("#role").textContent = role === "observer" ? "Watching (observer): your keys are not sent." : "Driving: your keys go to Claude Code.";
  // A clone session's review takes its column before the terminal is
  // sized (review.js fills it), so claude is not redrawn at once.
  $("#review").hidden = !info.clone;
  term = new Terminal({ cursorBlink: true, convertEol: false, fontSize: matchMedia("(max-width: 700px)").matches ? 11 : 14 });
  const fit = new FitAddon.FitAddon(); term.loadAddon(fit);
  term.open($("#terminal")); fit.fit();
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  // A WebSocket can set no header but its subprotocols: the key rides as
  // one ("paddock.key.<key>"), and the Runner picks "paddock".
  sock = new WebSocket(proto + "//" + location.host + "/api/sessions/" + encodeURIComponent(name) + "/terminal?role=" + role + "&rows=" + term.rows + "&cols=" + term.cols,
    ["paddock", "paddock.key." + key()]);
  sock.binaryType = "arraybuffer";
  sock.onmessage = (m) => term.write(new Uint8Array(m.data));
  sock.onclose = () => term && term.write("\r\n[the terminal ended]\r\n");
  term.onData((d) => sendInput(ctrlNext ? withCtrl(d) : d));
  term.onResize(({ rows, cols }) => sock.readyState === 1 && sock.send(JSON.stringify({ t: "r", rows, cols })));
  window.onresize = () => fit.fit();
  document.body.dataset.role = role;
  for (const b of document.querySelectorAll("#keys button")) b.disabled = role === "observer";
  const loadLogs = async () => {
    const es = await call("GET", "/api/sessions/" + encodeURIComponent(name) + "/logs").catch(() => []);
    const tb = $("#decisions tbody"); tb.textContent = "";
    for (const e of es.slice(-50).reverse()) {
      const tr = document.createElement("tr");
      cell(tr, new Date(e.time).toLocaleTimeString()); cell(tr, e.kind || "api"); cell(tr, e.decision);
      // An egress decision made before any host was named (the offline
      // posture refuses the connection itself) has neither host nor port.
      cell(tr, e.kind === "egress" ? (e.host ? e.host + ":" + e.port : "(no host named)") : e.method + " " + e.path); cell(tr, String(e.status || ""));
      cell(tr, String(e.input_tokens || e.bytes_in || 0)); cell(tr, String(e.output_tokens || e.bytes_out || 0)); cell(tr, e.reason || "");
      tb.appendChild(tr);
    }
  };
  loadLogs(); logTimer = setInterval(loadLogs, 2000);
  showPreviews(name, info);
  term.focus();
  currentSession = { name, info, role };
  document.dispatchEvent(new Event("paddock:session"));
  fit.fit();
}

// sendInput sends keys to claude's terminal, for a driver.
function sendInput(d) {
  if (currentSession && currentSession.role !== "observer" && sock && sock.readyState === 1) sock.send(JSON.stringify({ t: "i", d }));
}

// The key row: the keys a phone's keyboard lacks. Ctrl is sticky: the
// next key typed goes with it (Ctrl, then c, is ^C). An arrow is what the
// terminal's cursor-key mode asks for, as xterm.js itself sends it.
let ctrlNext = false;
function setCtrl(on) {
  ctrlNext = on;
  const b = $('#keys [data-key="ctrl"]'); // gone once loggedOut replaced the page
  if (b) b.classList.toggle("on", on);
}
function withCtrl(d) {
  setCtrl(false);
  if (d.length !== 1) return d;
  const c = d.toUpperCase().charCodeAt(0);
  if (c >= 64 && c <= 95) return String.fromCharCode(c - 64);
  return d === "?" ? "\x7f" : d;
}
const KEYS = { esc: "\x1b", tab: "\t", stab: "\x1b[Z" }, ARROWS = { up: "A", down: "B", right: "C", left: "D" };
for (const b of document.querySelectorAll("#keys button")) {
  b.onpointerdown = (e) => e.preventDefault(); // the terminal keeps the focus, and a phone its keyboard
  b.onclick = () => {
    const k = b.dataset.key;
    if (k === "ctrl") { setCtrl(!ctrlNext); return; }
    setCtrl(false);
    sendInput(ARROWS[k] ? (term && term.modes.applicationCursorKeysMode ? "\x1bO" : "\x1b[") + ARROWS[k] : KEYS[k]);
  };
}

// showPreviews lists the session's published ports (paddock port), each
// with an "open preview" link for a driver: the Runner gives a one-time
// link into an origin of the preview's own, opened in a new tab.
function showPreviews(name, info) {
  const ports = info.ports || [];
  $("#previews").hidden = ports.length === 0;
  const links = $("#previewLinks"); links.textContent = "";
  for (const p of ports) {
    const b = document.createElement("button");
    b.type = "button"; b.className = "preview"; b.dataset.port = String(p.box);
    b.textContent = "open preview of port " + p.box;
    b.disabled = !atLeast(info.your_role, "driver");
    b.onclick = async () => {
      // Opened before the request, so no popup blocker takes it.
      const w = window.open("about:blank", "_blank");
      try {
        const r = await call("POST", "/api/sessions/" + encodeURIComponent(name) + "/preview/" + p.box);
        $("#previewError").textContent = "";
        if (w) { w.opener = null; w.location = r.url; } else { location.assign(r.url); }
      } catch (e) { if (w) w.close(); $("#previewError").textContent = String(e.message || e); }
    };
    links.appendChild(b);
  }
}

function route() {
  closeSession();
  const m = location.hash.match(/^#\/s\/([^/]+)(?:\/(driver|observer))?$/);
  if (m) showSession(decodeURIComponent(m[1]), m[2] || "").catch((e) => alert(e.message));
  else showList().catch((e) => alert(e.message));
}
window.onhashchange = route;
$("#allUsers").onchange = () => showList().catch((e) => alert(e.message));
route();

// Connections waiting for approval (ask mode), live on every view: each
// row approves for the session's life or refuses this once. The Runner
// decides who may (operators and up).
async function showPending() {
  const ps = await call("GET", "/api/egress/pending");
  const tb = $("#pending tbody"); tb.textContent = "";
  $("#pending").hidden = ps.length === 0;
  const now = Date.now();
  for (const p of ps) {
    const hp = p.host + ":" + p.port;
    const tr = document.createElement("tr"); tr.dataset.session = p.name; tr.dataset.host = hp;
    cell(tr, p.name); cell(tr, hp);
    cell(tr, Math.round((now - new Date(p.since)) / 1000) + "s");
    cell(tr, Math.max(0, Math.round((new Date(p.deadline) - now) / 1000)) + "s");
    const act = cell(tr, "");
    const btn = (label, body) => {
      const b = document.createElement("button"); b.textContent = label; b.className = label;
      b.onclick = async () => {
        try { await call("POST", "/api/sessions/" + encodeURIComponent(p.session) + "/egress/approve", body); $("#pendingError").textContent = ""; }
        catch (e) { $("#pendingError").textContent = e.message; }
        showPending().catch(() => {});
      };
      act.appendChild(b);
    };
    btn("approve", { rule: hp, scope: "session" });
    btn("deny", { rule: hp, deny: true });
    tb.appendChild(tr);
  }
}
showPending().catch(() => {});
setInterval(() => showPending().catch(() => {}), 3000); // live.js shows a new one at once

// The list stays live: activity changes every turn.
setInterval(() => { if (!$("#list").hidden) showList().catch(() => {}); }, 2000);

// Log out: the Runner forgets this browser's cookie; a new login needs a
// new URL from `paddock web`.
$("#logout").onclick = async () => {
  await call("POST", "/logout").catch(() => {});
  loggedOut("Logged out. Run `paddock web` on the Runner's host for a new login URL.");
};

// paddock's own login (paddock credential login): its state for everyone,
// a way to log in for admins. The code never leaves this form but to the
// Runner, which alone holds the verifier it belongs to.
async function showLogin() {
  const st = await call("GET", "/api/login");
  const p = $("#login"); p.hidden = false; p.textContent = ""; p.className = "";
  const say = (text) => p.appendChild(document.createTextNode(text));
  if (st.dead) { p.className = "error"; say("paddock's Claude login was refused by the server (" + st.last_error + "): log in again. "); }
  else if (st.failing) { p.className = "error"; say("Refreshing paddock's Claude login fails (" + st.last_error + "); it is retried. "); }
  else if (st.logged_in) say("Claude login: paddock's own, refreshed by the Runner; the token in use expires " + new Date(st.expires).toLocaleTimeString() + ". ");
  if (me && me.admin) {
    const b = document.createElement("button"); b.id = "loginStart"; b.type = "button";
    b.textContent = st.logged_in ? "log in again" : "log paddock in to Claude";
    b.onclick = async () => {
      try { const r = await call("POST", "/api/login"); $("#loginURL").href = r.url; $("#loginFlow").hidden = false; }
      catch (e) { alert(e.message); }
    };
    p.appendChild(b);
  }
  if (!p.textContent) p.hidden = true;
}

$("#loginForm").onsubmit = async (ev) => {
  ev.preventDefault();
  $("#loginError").textContent = "logging in…";
  try {
    await call("POST", "/api/login/finish", { code: $("#loginCode").value.trim() });
    $("#loginError").textContent = ""; $("#loginCode").value = ""; $("#loginFlow").hidden = true;
    showLogin();
  } catch (e) { $("#loginError").textContent = e.message; }
};
