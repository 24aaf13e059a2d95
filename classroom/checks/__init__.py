"""The checks, one module per notebook (and the speed check of 04), on the machinery of
``base``; notebooks import them through ``classroom.check``."""
