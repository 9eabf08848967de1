/* The live explorers' runtime kept for the next page (issue 42): a service worker that answers every request
 * for _static/live/ (Pyodide, ECharts, the book's Python files) from its own cache once it has fetched it.
 * A reader's second explorer page then downloads none of the ≈ 6 MB again, whatever cache headers the host
 * sends. src/booktools/live.py writes this file to the site's root (so that it may serve every page of the
 * book), with RUNTIME_VERSION replaced by a hash of the runtime and the Python files: a new build is a new
 * cache, and the old one is deleted. book/_js/live.js registers it on pages with an explorer.
 */
"use strict";
var CACHE = "bl-live-RUNTIME_VERSION";
var PREFIX = "bl-live-";

self.addEventListener("install", function () { self.skipWaiting(); });

self.addEventListener("activate", function (event) {
  event.waitUntil(caches.keys().then(function (keys) {
    return Promise.all(keys.filter(function (k) { return k.indexOf(PREFIX) === 0 && k !== CACHE; })
      .map(function (k) { return caches.delete(k); }));
  }).then(function () { return self.clients.claim(); }));
});

self.addEventListener("fetch", function (event) {
  var request = event.request;
  if (request.method !== "GET" || request.url.indexOf("/_static/live/") < 0) return;
  event.respondWith(caches.open(CACHE).then(function (cache) {
    return cache.match(request).then(function (hit) {
      if (hit) return hit;
      return fetch(request).then(function (response) {
        if (response.ok && response.type === "basic") cache.put(request, response.clone());
        return response;
      });
    });
  }));
});
