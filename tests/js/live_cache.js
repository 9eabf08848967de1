/* What the live explorers' service worker keeps (book/_js/live-sw.js): whether it controls the page, and
 * the file name of every response in its caches (those named bl-live-…). tests/test_live_explorers.py reads
 * it after a reader made an explorer live. */
async () => {
  const names = (await caches.keys()).filter((name) => name.startsWith('bl-live-'));
  const files = [];
  for (const name of names) {
    const cache = await caches.open(name);
    for (const request of await cache.keys()) files.push(request.url.split('/').pop().split('?')[0]);
  }
  return { controlled: !!(navigator.serviceWorker && navigator.serviceWorker.controller), caches: names, files };
}
