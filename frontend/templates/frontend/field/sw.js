/* Fieldcraft field service worker: the app shell offline, API reads network-first.
   Writes are never cached here: the page's outbox (IndexedDB) keeps them until the server
   confirms them. */
"use strict";
const CONFIG = {{ config }};
const CACHE = "fieldcraft-field-" + CONFIG.version;
const NAV_TIMEOUT_MS = 4000;

function cacheable(response) {
  return response && response.ok && !response.redirected && response.type === "basic";
}

async function precache() {
  const cache = await caches.open(CACHE);
  // Through the HTTP cache: the page has just loaded these (hashed names in production,
  // revalidated with max-age=0 in development), so precaching costs no second download.
  await cache.addAll(CONFIG.assets);
  try {
    const shell = await fetch(CONFIG.shell, { credentials: "same-origin", cache: "no-store" });
    if (cacheable(shell)) await cache.put(CONFIG.shell, shell);
  } catch (e) { /* the page caches the shell on its next online load */ }
}

self.addEventListener("install", (event) => {
  event.waitUntil(precache().then(() => self.skipWaiting()));
});

self.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    const keys = await caches.keys();
    // Keep the previous shell for a moment: a new cache without one still answers offline.
    const current = await caches.open(CACHE);
    if (!(await current.match(CONFIG.shell))) {
      for (const key of keys) {
        if (key === CACHE || !key.startsWith("fieldcraft-field-")) continue;
        const old = await (await caches.open(key)).match(CONFIG.shell);
        if (old) { await current.put(CONFIG.shell, old); break; }
      }
    }
    await Promise.all(keys.filter((k) => k.startsWith("fieldcraft-field-") && k !== CACHE).map((k) => caches.delete(k)));
    await self.clients.claim();
  })());
});

function timeout(ms) {
  return new Promise((_, reject) => setTimeout(() => reject(new Error("timeout")), ms));
}

async function shellFirstNetwork(request) {
  const cache = await caches.open(CACHE);
  try {
    const response = await Promise.race([fetch(request), timeout(NAV_TIMEOUT_MS)]);
    if (cacheable(response)) await cache.put(CONFIG.shell, response.clone());
    return response;
  } catch (e) {
    const cached = await cache.match(CONFIG.shell);
    if (cached) return cached;
    return new Response("<h1>Offline</h1><p>Open the field app once while online so it can work offline.</p>",
      { status: 503, headers: { "Content-Type": "text/html; charset=utf-8" } });
  }
}

async function cacheFirst(request) {
  const cache = await caches.open(CACHE);
  const cached = await cache.match(request);
  if (cached) return cached;
  const response = await fetch(request);
  if (cacheable(response)) await cache.put(request, response.clone());
  return response;
}

async function networkFirst(request) {
  const cache = await caches.open(CACHE);
  try {
    const response = await fetch(request);
    if (cacheable(response)) await cache.put(request, response.clone());
    return response;
  } catch (e) {
    const cached = await cache.match(request);
    if (!cached) throw e;
    // Tell the page this is the last copy, not news from the server.
    const headers = new Headers(cached.headers);
    headers.set("X-Fieldcraft-Offline", "1");
    return new Response(cached.body, { status: cached.status, statusText: cached.statusText, headers: headers });
  }
}

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.method !== "GET") return;  // the outbox handles writes
  const url = new URL(request.url);
  if (url.origin !== self.location.origin) return;
  if (request.mode === "navigate" && url.pathname === CONFIG.shell) {
    event.respondWith(shellFirstNetwork(request));
  } else if (CONFIG.assets.includes(url.pathname)) {
    event.respondWith(cacheFirst(request));
  } else if (url.pathname === CONFIG.tasksApi) {
    event.respondWith(networkFirst(request));
  }
});
