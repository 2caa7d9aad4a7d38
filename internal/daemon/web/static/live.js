// The page kept live by the Runner's event stream, and what a person
// away from the terminal needs: a notification when a session waits for
// them or claude exits or a connection asks to be let through, a message
// box, and the last turn as text. It runs after app.js and uses its
// call, key, currentSession, showList and showPending.
"use strict";

// --- The event stream -------------------------------------------------
// Read with fetch: an EventSource can send no header, and the page's key
// is one. A dropped stream is opened again after the last event seen
// (Last-Event-ID), so nothing in between is lost while the Runner keeps
// it. A stream silent for longer than the Runner's heartbeat allows (a
// phone that changed networks, a connection half open) is dropped and
// opened again, as it is when the browser comes back online or the tab
// is shown again. One tab of this origin holds the stream (a Web Lock)
// and passes each event to the others (a BroadcastChannel): a browser
// keeps few connections open to one host, and each tab would hold one.
let lastEventId = "";
let streamAbort = null;  // ends the open stream
let streamStopped = false; // logged out: no more streams
const SILENCE = 40000;     // the Runner sends a line at least every 15 s
const channel = "BroadcastChannel" in window ? new BroadcastChannel("paddock-events") : null;
if (channel) {
  channel.onmessage = (m) => {
    const d = m.data || {};
    if (typeof d.type !== "string" || !d.ev) return;
    if (d.ev.seq) lastEventId = String(d.ev.seq); // where to go on if this tab takes the stream over
    onEvent(d.type, d.ev, false);
  };
}

async function streamEvents() {
  while (!streamStopped) {
    const ac = new AbortController();
    streamAbort = ac;
    let timer = 0;
    const alive = () => { clearTimeout(timer); timer = setTimeout(() => ac.abort(), SILENCE); };
    try {
      alive();
      const headers = { "X-Paddock-Key": key() };
      if (lastEventId) headers["Last-Event-ID"] = lastEventId;
      const r = await fetch("/api/events", { headers, signal: ac.signal });
      if (r.status === 401) { streamStopped = true; break; } // logged out: the next call says so
      if (!r.ok || !r.body) throw new Error(r.statusText);
      const rd = r.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await rd.read();
        if (done) break;
        alive();
        buf += value;
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i); buf = buf.slice(i + 2);
          let id = "", type = "", data = "";
          for (const line of block.split("\n")) {
            if (line.startsWith("id: ")) id = line.slice(4);
            else if (line.startsWith("event: ")) type = line.slice(7);
            else if (line.startsWith("data: ")) data += line.slice(6);
          }
          if (id) lastEventId = id;
          if (!type || !data) continue;
          let ev;
          try { ev = JSON.parse(data); } catch (e) { continue; } // one bad event is skipped
          onEvent(type, ev, true);
          if (channel) channel.postMessage({ type, ev });
        }
      }
    } catch (e) { /* opened again below */ }
    clearTimeout(timer);
    const again = ac.signal.aborted && !streamStopped && streamAbort !== ac; // reconnect() asked: at once
    if (!streamStopped && !again) await new Promise((res) => setTimeout(res, 2000));
  }
}

// reconnect drops the open stream and opens it again at once.
function reconnect() {
  const ac = streamAbort;
  streamAbort = null;
  if (ac) ac.abort();
}
window.addEventListener("online", reconnect);
document.addEventListener("visibilitychange", () => { if (document.visibilityState === "visible") reconnect(); });

// stopEvents ends the stream for good (app.js's loggedOut).
function stopEvents() {
  streamStopped = true;
  if (streamAbort) streamAbort.abort();
  if (channel) channel.close();
}

function startEvents() {
  // The lock is held while streamEvents runs: until this tab closes or
  // is logged out; then another tab takes the stream over.
  if (navigator.locks && window.isSecureContext) navigator.locks.request("paddock-events", () => streamEvents()).catch(() => {});
  else startEvents();
}

let listTimer = null;
function refreshList() { // many events at once refresh the list once
  if (listTimer || $("#list").hidden) return;
  listTimer = setTimeout(() => { listTimer = null; showList().catch(() => {}); }, 150);
}

// onEvent updates the page for an event; the tab that holds the stream
// (lead) also tells the person.
function onEvent(type, ev, lead) {
  const a = ev.activity || {};
  const tell = lead ? notify : () => {};
  switch (type) {
    case "turn.ended":
      if (a.state === "waiting") tell(ev, "waiting", ev.name + " is waiting for you", "Claude finished its turn.");
      break;
    case "activity":
      if (a.state === "exited") tell(ev, "exited", ev.name + ": claude exited", a.reason || "exit status " + (a.signal || a.exit_status || 0));
      break;
    case "egress.pending":
      showPending().catch(() => {});
      tell(ev, "egress", ev.name + " asks to reach " + ev.host + ":" + ev.port, "Approve or deny it on the page; unanswered, it is refused.");
      break;
    case "lagged":
      showPending().catch(() => {});
      break;
    default:
      if (type !== "session") return;
  }
  refreshList();
  if (currentSession && currentSession.name === ev.name && type !== "egress.pending") loadTurn(ev.name);
}

// --- Notifications ----------------------------------------------------
// Asked once, by a button (a browser shows its question only after a
// person's own tap). Shown through a service worker where there is one
// (a phone's browser shows none from the page itself), else by the page.
const ASKED = "paddock-notify-asked";
const canNotify = () => "Notification" in window && Notification.permission === "granted";
let worker = null;
async function startWorker() {
  if (!("serviceWorker" in navigator) || !window.isSecureContext) return;
  try { worker = await navigator.serviceWorker.register("/sw.js"); } catch (e) { worker = null; }
}
if ("serviceWorker" in navigator) {
  // A tapped notification brings this page to its session (sw.js).
  navigator.serviceWorker.addEventListener("message", (m) => {
    const h = m.data && m.data.hash;
    if (typeof h === "string" && /^#\/s\/[^/]+$/.test(h)) location.hash = h;
  });
}
{
  const b = $("#notify");
  b.hidden = !("Notification" in window) || Notification.permission !== "default" || !!localStorage.getItem(ASKED);
  b.onclick = async () => {
    localStorage.setItem(ASKED, "1");
    b.hidden = true;
    if (await Notification.requestPermission() === "granted") await startWorker();
  };
  if (canNotify()) startWorker();
}

// STALE: an event older than this (one a reconnected stream replays) is
// not told: its approval has timed out, its turn was likely answered.
const STALE = 90000;

function notify(ev, kind, title, body) {
  if (!canNotify()) return;
  if (ev.time && Date.now() - new Date(ev.time) > STALE) return;
  // A turn's end is on the screen of a person watching that session; an
  // exit or an approval is told anyway (an approval times out).
  if (kind === "waiting" && document.visibilityState === "visible" && document.hasFocus() && currentSession && currentSession.name === ev.name) return;
  const hash = "#/s/" + encodeURIComponent(ev.name);
  const opts = { body, tag: ev.session + ":" + kind, data: { hash } };
  const byPage = () => {
    try {
      const n = new Notification(title, opts);
      n.onclick = () => { window.focus(); location.hash = hash; n.close(); };
    } catch (e) { /* a phone's browser without the worker: the list still shows it first */ }
  };
  if (worker) worker.showNotification(title, opts).catch(byPage);
  else byPage();
}

// --- A message, and the last turn, without the terminal ---------------
$("#message").onsubmit = async (ev) => {
  ev.preventDefault();
  const ta = ev.target.elements.text, st = $("#messageStatus");
  const text = ta.value.trim();
  if (!text || !currentSession) return;
  const name = currentSession.name;
  st.className = ""; st.textContent = "sending…";
  try {
    const r = await call("POST", "/api/sessions/" + encodeURIComponent(name) + "/message", { text });
    ta.value = "";
    st.textContent = r.queued ? "queued: claude is in a turn and takes it when the turn ends" : "sent: claude took it";
    loadTurn(name);
  } catch (e) { st.className = "error"; st.textContent = e.message; }
};
$("#message").elements.text.onkeydown = (e) => {
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); $("#message").requestSubmit(); }
};

// toolSummary is a tool call in a line: its description, command or file.
function toolSummary(p) {
  const i = p.input || {};
  const s = i.description || i.command || i.file_path || i.path || i.pattern || i.url || JSON.stringify(i);
  return (p.tool || "tool") + ": " + (s.length > 200 ? s.slice(0, 200) + "…" : s);
}

let turnSeq = 0;
async function loadTurn(name) {
  const my = ++turnSeq;
  let r;
  try { r = await call("GET", "/api/sessions/" + encodeURIComponent(name) + "/turn"); }
  catch (e) {
    if (my !== turnSeq || !currentSession) return; // a logout replaced the page
    $("#turnState").textContent = ""; $("#turnPrompt").textContent = e.message; $("#turnParts").textContent = "";
    return;
  }
  if (my !== turnSeq || !currentSession || currentSession.name !== name) return;
  const t = r.turn || {};
  const working = ((r.session || {}).activity || {}).state === "working";
  $("#turnState").textContent = working ? "(claude is working…)" : "";
  $("#turnPrompt").textContent = t.prompt ? "You: " + t.prompt : "No turn yet.";
  const box = $("#turnParts"); box.textContent = "";
  if (t.dropped) { const p = document.createElement("p"); p.className = "note"; p.textContent = "(" + t.dropped + " earlier steps not shown)"; box.appendChild(p); }
  for (const p of t.parts || []) {
    const el = document.createElement(p.type === "text" ? "p" : "div");
    if (p.type === "text") { el.className = "said"; el.textContent = p.text; }
    else if (p.type === "tool_use") { el.className = "tool"; el.textContent = "▸ " + toolSummary(p); }
    else if (p.is_error) { el.className = "tool error"; el.textContent = "✗ " + (p.text || "").split("\n")[0]; }
    else continue;
    box.appendChild(el);
  }
}

document.addEventListener("paddock:session", () => {
  const s = currentSession;
  const driver = s.role !== "observer"; // showSession asked to drive only where the role lets this person
  $("#message").hidden = !driver; $("#messageStatus").textContent = "";
  $("#turnPrompt").textContent = ""; $("#turnParts").textContent = ""; $("#turnState").textContent = "";
  loadTurn(s.name);
});

startEvents();
