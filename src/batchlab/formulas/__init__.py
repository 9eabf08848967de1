"""Plain numbers in, numbers out: the formulas of every chapter, with no torch and no numpy (they run in a notebook, the CLI and a browser alike). Nothing here imports another part of batchlab."""
