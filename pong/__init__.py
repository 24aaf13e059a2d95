"""Atari Pong from 42x42 grayscale pixels, 4 stacked frames: environment, policies, problem.

Registered with the core by the course repository's ``pong.plugin`` (an ``es.plugins`` entry point). The names below
load on first use, so registering Pong does not import ALE.
"""
__all__ = ["PONG_ACTIONS", "make_pong", "make_pong_vector"]


def __getattr__(name):
    if name in __all__:
        from . import env
        return getattr(env, name)
    raise AttributeError(f"module 'pong' has no attribute {name!r}")
