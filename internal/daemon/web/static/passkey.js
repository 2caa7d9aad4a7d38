// The passkey pages: /enroll?token=… makes a passkey with a one-time
// enrolment link and logs in; /passkey logs in with one. Both end as the
// one-time login URL does: the server sets the login cookie, and the
// page's key (in the answer's body) goes into this origin's localStorage,
// where app.js takes it.
"use strict";
const KEY = "paddock-key";
const $ = (id) => document.getElementById(id);
const say = (t) => { $("msg").textContent = t; };

async function post(path, body) {
  const r = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Paddock": "1" },
    body: JSON.stringify(body),
    credentials: "same-origin",
  });
  const j = await r.json().catch(() => ({ error: r.status + " " + r.statusText }));
  if (!r.ok) throw new Error(j.error || r.statusText);
  return j;
}

function loggedIn(key) {
  localStorage.setItem(KEY, key);
  location.replace("/");
}

function supported() {
  if (!window.PublicKeyCredential || !PublicKeyCredential.parseCreationOptionsFromJSON) {
    say("This browser cannot use passkeys here (it needs WebAuthn with JSON options, and the page over https or on localhost).");
    return false;
  }
  return true;
}

async function enroll(token) {
  if (!supported()) return;
  say("Asking your device for a passkey…");
  try {
    const b = await post("/passkey/enroll/begin", { token });
    const cred = await navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(b.options.publicKey) });
    const f = await post("/passkey/enroll/finish?token=" + encodeURIComponent(token), cred.toJSON());
    say("Passkey made; logging in…");
    loggedIn(f.key);
  } catch (e) {
    say("No passkey was made: " + e.message);
  }
}

async function login() {
  if (!supported()) return;
  say("Asking your device for a passkey…");
  try {
    const b = await post("/passkey/login/begin", {});
    const cred = await navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(b.options.publicKey) });
    const f = await post("/passkey/login/finish?id=" + encodeURIComponent(b.id), cred.toJSON());
    loggedIn(f.key);
  } catch (e) {
    say("Not logged in: " + e.message);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const token = new URLSearchParams(location.search).get("token");
  if (location.pathname === "/enroll" && token) {
    // The token leaves the address bar (and the history) at once.
    history.replaceState(null, "", "/enroll");
    $("enroll-box").hidden = false;
    $("enroll").addEventListener("click", () => enroll(token));
  } else {
    $("login-box").hidden = false;
    $("login").addEventListener("click", login);
  }
});
