// paddock's service worker. It only shows the page's notifications (a
// phone's browser shows none from a page itself) and, when one is tapped,
// brings the page to its session. It handles no fetch: every request
// goes to the Runner as it would without it.
"use strict";
self.addEventListener("notificationclick", (ev) => {
  ev.notification.close();
  const hash = (ev.notification.data && ev.notification.data.hash) || "";
  ev.waitUntil((async () => {
    const wins = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
    for (const c of wins) {
      if (new URL(c.url).origin === self.location.origin) {
        await c.focus();
        c.postMessage({ hash });
        return;
      }
    }
    await self.clients.openWindow("/" + hash);
  })());
});
