"""The applications that join the arms: ``python -m batchlab`` (``cli``) and grading a class's notebooks (``grade``)."""
