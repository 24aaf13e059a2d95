"""Atari Pong from 42x42 grayscale pixels, 4 stacked frames: environment, policies, problem."""
from .env import PONG_ACTIONS, make_pong, make_pong_vector

__all__ = ["PONG_ACTIONS", "make_pong", "make_pong_vector"]
