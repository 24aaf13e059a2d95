"""What every Pong policy starts from: the observation's shape, Pong's static picture
(``background.npy``: field, walls, 0:0 score; made by the course repository's ``scripts/make_pong_background.py``)
and the number of actions. A module of its own so that the policy modules can share it
without importing each other."""
from __future__ import annotations

from pathlib import Path

import numpy as np

BACKGROUND = np.load(Path(__file__).with_name("background.npy")).astype(np.float32)  # (42, 42)
BACKGROUND_INT = BACKGROUND.astype(np.int16)
N_ACTIONS = 3


def check_obs(obs) -> np.ndarray:
    obs = np.asarray(obs)
    if obs.ndim != 4 or obs.shape[1:] != (4, 42, 42):
        raise ValueError(f"expected observations of shape (rows, 4, 42, 42), got {obs.shape}")
    return obs
