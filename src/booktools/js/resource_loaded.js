/* True once the page has fetched a resource whose URL contains `part` (tests/test_live_explorers.py: the
 * live runtime fetched before the reader reaches an explorer). */
part => performance.getEntriesByType('resource').some(r => r.name.includes(part))
