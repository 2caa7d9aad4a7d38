// The review of a clone session (paddock run --clone) beside its terminal:
// its diff against its base (files, hunks; what the box wrote is shown as
// text only, never as markup), comments on lines sent to claude as one
// message, and merge and discard with the same checks as the CLI's (the
// Runner makes them). No inline script: the page's CSP forbids it.
"use strict";
{
  let open = null; // { name, id, info, role, timer, seen, text, comments, working }

  const enc = encodeURIComponent;
  const say = (text, bad) => { const p = $("#reviewStatus"); p.textContent = text; p.className = bad ? "error" : ""; };

  // diff.sh's output as the page needs it: what comes before the first
  // file (paddock's note of files the host runs), then each file.
  function parseDiff(text) {
    const lines = text.split("\n");
    if (lines.length && lines[lines.length - 1] === "") lines.pop();
    const pre = [], files = [];
    let f = null, h = null, o = 0, n = 0;
    for (const l of lines) {
      if (l.startsWith("diff --git ")) {
        const i = l.lastIndexOf(" b/");
        f = { path: i > 0 ? l.slice(i + 3) : l.slice(11), hunks: [], notes: [], adds: 0, dels: 0 };
        files.push(f); h = null; continue;
      }
      if (!f) { pre.push(l); continue; }
      if (l.startsWith("@@")) {
        const m = l.match(/^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/);
        o = m ? +m[1] : 0; n = m ? +m[2] : 0;
        h = { head: l, lines: [] }; f.hunks.push(h); continue;
      }
      if (!h) {
        if (l.startsWith("+++ ") && l !== "+++ /dev/null") f.path = l.slice(6);
        else if (l.startsWith("--- ") && l !== "--- /dev/null" && !f.hunks.length) f.old = l.slice(6);
        else if (!l.startsWith("index ") && !l.startsWith("--- ") && !l.startsWith("+++ ")) f.notes.push(l);
        continue;
      }
      switch (l[0]) {
        case "+": h.lines.push({ kind: "add", text: l, n: n++ }); f.adds++; break;
        case "-": h.lines.push({ kind: "del", text: l, o: o++ }); f.dels++; break;
        case "\\": h.lines.push({ kind: "meta", text: l }); break;
        default: h.lines.push({ kind: "ctx", text: l, o: o++, n: n++ });
      }
    }
    return { pre: pre.join("\n").trim(), files };
  }

  const td = (tr, text, cls) => { const c = document.createElement("td"); c.textContent = text; if (cls) c.className = cls; tr.appendChild(c); return c; };

  // A line's place: the new file's line for what is there now, the old
  // file's for a removed line.
  const where = (path, ln) => ln.kind === "del" ? { path, side: "old", line: ln.o } : { path, side: "new", line: ln.n };
  const keyOf = (w) => w.path + "\u0000" + w.side + "\u0000" + w.line;

  function render(text) {
    const d = parseDiff(text);
    const hr = $("#hostRun");
    hr.hidden = !d.pre; hr.textContent = d.pre;
    const box = $("#diff"); box.textContent = "";
    if (!d.files.length) { box.textContent = "No change yet against the base."; }
    for (const f of d.files) {
      const div = document.createElement("div"); div.className = "file"; div.dataset.path = f.path;
      const head = document.createElement("div"); head.className = "fileHead"; head.textContent = f.path;
      const counts = document.createElement("span"); counts.className = "counts"; counts.textContent = "+" + f.adds + " −" + f.dels; head.appendChild(counts);
      div.appendChild(head);
      const t = document.createElement("table"); t.className = "hunks";
      for (const note of f.notes) { const tr = document.createElement("tr"); tr.className = "hunk"; td(tr, ""); td(tr, ""); td(tr, note, "code"); t.appendChild(tr); }
      for (const h of f.hunks) {
        const tr = document.createElement("tr"); tr.className = "hunk"; td(tr, ""); td(tr, ""); td(tr, h.head, "code"); t.appendChild(tr);
        for (const ln of h.lines) {
          const r = document.createElement("tr"); r.className = "line " + ln.kind;
          td(r, ln.o === undefined ? "" : String(ln.o), "ln"); td(r, ln.n === undefined ? "" : String(ln.n), "ln"); td(r, ln.text, "code");
          if (ln.kind !== "meta") {
            const w = where(f.path, ln);
            r.dataset.line = w.side + ":" + w.line;
            r.onclick = () => editComment(r, w, ln.text);
            t.appendChild(r);
            const c = open.comments.get(keyOf(w));
            if (c) { c.code = ln.text; t.appendChild(commentRow(c)); }
            continue;
          }
          t.appendChild(r);
        }
      }
      div.appendChild(t); box.appendChild(div);
    }
  }

  // A comment under its line: its words and a way to take it back.
  function commentRow(c) {
    const tr = document.createElement("tr"); tr.className = "comment"; tr.dataset.key = keyOf(c);
    td(tr, ""); td(tr, "");
    const cell = td(tr, c.text);
    const rm = document.createElement("button"); rm.type = "button"; rm.textContent = "remove";
    rm.onclick = (ev) => { ev.stopPropagation(); open.comments.delete(keyOf(c)); tr.remove(); counted(); };
    cell.appendChild(document.createTextNode(" ")); cell.appendChild(rm);
    return tr;
  }

  function editComment(row, w, code) {
    if (!atLeast(open.role, "driver") || (row.nextSibling && row.nextSibling.classList.contains("editing"))) return;
    const tr = document.createElement("tr"); tr.className = "comment editing";
    td(tr, ""); td(tr, "");
    const cell = td(tr, "");
    const ta = document.createElement("textarea"); ta.rows = 3; ta.placeholder = "your comment on this line, for claude";
    const old = open.comments.get(keyOf(w)); if (old) ta.value = old.text;
    const ok = document.createElement("button"); ok.type = "button"; ok.textContent = "add comment"; ok.className = "addComment";
    const no = document.createElement("button"); no.type = "button"; no.textContent = "cancel";
    ok.onclick = () => {
      const text = ta.value.trim();
      const next = tr.nextSibling;
      if (next && next.classList.contains("comment") && next.dataset.key === keyOf(w)) next.remove();
      tr.remove();
      if (!text) { open.comments.delete(keyOf(w)); counted(); return; }
      const c = { ...w, code, text };
      open.comments.set(keyOf(w), c);
      row.after(commentRow(c)); counted();
    };
    no.onclick = () => tr.remove();
    cell.append(ta, ok, no);
    row.after(tr); ta.focus();
  }

  function counted() {
    const n = open.comments.size;
    $("#comments").hidden = n === 0;
    $("#commentCount").textContent = n + (n === 1 ? " comment" : " comments") + " on this change";
  }

  // The comments as one message: each with its file, line and the line
  // itself. What the box wrote is quoted with its control characters
  // made "?" (a message holds none but tab and newline).
  function compose() {
    const cs = [...open.comments.values()].sort((a, b) => a.path < b.path ? -1 : a.path > b.path ? 1 : a.line - b.line);
    const clean = (s) => s.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, "?");
    let m = "Review comments on your change (" + cs.length + "), from " + (me ? me.name : "the reviewer") + " on the paddock page:\n";
    for (const c of cs) {
      m += "\n" + clean(c.path) + ", line " + c.line + (c.side === "old" ? " of the old version (a line you removed)" : "") + ":\n";
      m += "> " + clean(c.code) + "\n" + c.text + "\n";
    }
    return m + "\nPlease address each comment, then commit.";
  }

  async function sendComments() {
    if (!open || !open.comments.size) return;
    say("sending…");
    try {
      const r = await call("POST", "/api/sessions/" + enc(open.name) + "/message", { text: compose() });
      open.comments.clear(); counted();
      for (const tr of document.querySelectorAll("#diff tr.comment")) tr.remove();
      say(r.queued ? "Sent: claude is in a turn, so your comments wait in its queue." : "Sent: claude took your comments.");
    } catch (e) { say(e.message, true); }
  }

  async function loadDiff() {
    if (!open) return;
    const name = open.name;
    let text;
    try {
      const r = await fetch("/api/sessions/" + enc(name) + "/diff", { headers: { "X-Paddock-Key": key() } });
      text = await r.text();
      if (!r.ok) { let j = {}; try { j = JSON.parse(text); } catch (e) { /* text */ } throw new Error(j.error || text.trim() || r.statusText); }
    } catch (e) { if (open && open.name === name) say("diff: " + e.message, true); return; }
    if (!open || open.name !== name || text === open.text) return;
    open.text = text; render(text);
    $("#review").dataset.loaded = String(Date.now());
  }

  // The session as the list shows it: the branch, how far ahead, and
  // whether the host has it; the diff follows each change the Runner sees
  // (a turn's end, a commit) and, during a turn, every 10 s.
  async function poll() {
    if (!open) return;
    const s = await call("GET", "/api/sessions/" + enc(open.name)).catch(() => null);
    if (!s || !open || !s.clone) return;
    const c = s.clone, a = s.activity || {};
    open.info = s;
    let b = c.branch + " +" + (c.ahead || 0) + (c.dirty ? "*" : "");
    if (c.head && c.head === c.merged) b += " merged"; else if (c.head && c.head === c.fetched) b += " fetched";
    $("#branch").textContent = b;
    const seen = [a.state, a.since, c.head, c.dirty, c.checked, s.observed].join("|");
    const now = Date.now();
    if (seen !== open.seen || (a.state === "working" && now - open.loaded > 10000)) {
      open.seen = seen; open.loaded = now;
      if (s.observed === "running") loadDiff();
    }
  }

  async function merge(squash) {
    say(squash ? "squashing and merging…" : "merging…");
    try {
      const r = await call("POST", "/api/sessions/" + enc(open.name) + "/merge", squash ? { squash: true } : {});
      say(r.kind === "up to date" ? r.fetch.ref + " is already in " + r.into + "; nothing to merge."
        : "Merged into " + r.into + ": " + r.kind + ", " + r.old.slice(0, 12) + " → " + r.new.slice(0, 12) + ", " + r.files + " file(s) changed" + (r.work_tree ? "; the working tree is updated." : "."));
    } catch (e) { say(e.message, true); }
    open.seen = ""; poll();
  }

  // discard is paddock rm, with its checks: a running session and a clone
  // whose work the host lacks go only when the person says so.
  async function discard() {
    const s = open.info, c = s.clone || {};
    const unsaved = c.dirty || (c.ahead > 0 && c.head !== c.fetched && c.head !== c.merged);
    let q = "Discard session " + s.name + ": its box, its volume and its clone?";
    if (unsaved) q += "\n\nIts branch " + c.branch + " has work your repository does not have (" + (c.ahead || 0) + " commit(s) beyond its base" + (c.dirty ? ", and changes not committed" : "") + "): it goes with it.";
    if (!confirm(q)) return;
    try { await call("DELETE", "/api/sessions/" + enc(s.id)); location.hash = "#/"; }
    catch (e) { say(e.message, true); }
  }

  function start() {
    const cur = currentSession;
    if (!cur || !cur.info || !cur.info.clone) { $("#review").hidden = true; return; }
    open = { name: cur.name, info: cur.info, role: cur.info.your_role || "observer", comments: new Map(), seen: "", text: null, loaded: 0 };
    $("#review").hidden = false; $("#diff").textContent = ""; say(""); counted();
    $("#merge").hidden = $("#squash").hidden = !atLeast(open.role, "owner");
    $("#discard").hidden = !atLeast(open.role, "operator");
    $("#reviewHint").textContent = atLeast(open.role, "driver") ? "Click a line to comment on it; send your comments to claude as one message." : "";
    poll(); open.timer = setInterval(poll, 2000);
    window.dispatchEvent(new Event("resize")); // the terminal fits its narrower column
  }

  function stop() {
    if (open && open.timer) clearInterval(open.timer);
    open = null; $("#review").hidden = true;
  }

  $("#diffRefresh").onclick = () => { if (open) { open.text = null; loadDiff(); } };
  $("#merge").onclick = () => merge(false);
  $("#squash").onclick = () => merge(true);
  $("#discard").onclick = discard;
  $("#sendComments").onclick = sendComments;
  document.addEventListener("paddock:session", () => { stop(); start(); });
  document.addEventListener("paddock:close", stop);
  if (currentSession) start();
}
