"""The tests, a package: each module is imported as ``tests.<name>``, so a shared helper has one import
path (``from tests.book_pages import PAGES``) and one module object, and the conftest.py here
(``tests.conftest``) does not shadow the root conftest.py (``conftest``)."""
