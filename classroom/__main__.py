import sys

try:
    from .cli import main
except (ImportError, PermissionError) as exc:     # a module the grader needs is missing or closed to this user
    from .environment import grader_cannot_import
    print(grader_cannot_import(exc), file=sys.stderr)
    sys.exit(3)

sys.exit(main())
