/* Scroll an element to the middle of the screen with the page's own scrollIntoView. Playwright's
 * scroll_into_view_if_needed measures the element first, and a section the browser has not laid out yet
 * (content-visibility: auto, booktools.fast_pages) has only an estimated height: it scrolled thousands of
 * pixels short. The page's own call lays the section out first and lands where a reader's link lands. */
element => element.scrollIntoView({block: 'center'})
