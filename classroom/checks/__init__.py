"""The checks, one module per notebook (and the speed check of 04); each registers its
checks in ``classroom.check``, which students import: ``from classroom import check``."""
from .. import check  # noqa: F401  (registers every check, whichever module is imported first)
