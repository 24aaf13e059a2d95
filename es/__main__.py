import sys

try:
    from .cli import main
except (ImportError, PermissionError) as exc:     # a module es needs is missing or closed to this user
    if sys.argv[1:2] not in (["grade"], ["preflight"]):
        raise
    from classroom.environment import grader_cannot_import     # the grader's commands: a message, exit 3
    print(grader_cannot_import(exc), file=sys.stderr)
    sys.exit(3)

sys.exit(main())
