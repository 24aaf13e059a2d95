import sys

try:
    from .cli import main
except (ImportError, PermissionError) as exc:     # a package es needs is missing or closed to this user
    where = getattr(exc, "filename", None)
    name = getattr(exc, "name", None) or where or "a package it needs"
    print(f"error: python -m es cannot start: it cannot import {name} ({exc.__class__.__name__}: "
          f"{' '.join(str(exc).split())[:300]})\n"
          f"  fix: {sys.executable} -m pip install -r requirements.txt"
          + (f"   (or make it readable: chmod -R a+rX {where})" if isinstance(exc, PermissionError) and where else "")
          + "\nNothing was run (exit status 3).", file=sys.stderr)
    sys.exit(3)

sys.exit(main())
