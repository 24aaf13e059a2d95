"""The course's commands under ``python -m es`` (an ``es.plugins`` entry point): ``es``
itself never imports the course; this registers thin aliases of ``python -m classroom``."""
from es import registry

HELP = {"notebooks": "build notebooks/ and solutions/ from source/ (python -m classroom notebooks)",
        "release": "write the student release: notebooks and support code, no answer key",
        "grade": "grade submitted notebooks or a class (python -m classroom grade)",
        "preflight": "can this machine grade? a known answer in the kernel students get (python -m classroom preflight)",
        "site": "build the course website offline (python -m classroom site)"}


def register() -> None:
    for name, text in HELP.items():
        registry.register_command(name, help=text, run=lambda argv, name=name: _run(name, argv))


def _run(name: str, argv) -> int:
    from .cli import main
    return main([name, *argv], prog="python -m es")
