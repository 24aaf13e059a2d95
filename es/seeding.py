"""Every random stream of a run comes from integers alone, through this module.

A stream is ``rng_for(seed, TAG, *key)``: NumPy's ``SeedSequence(seed, spawn_key=(TAG,
*key))``, never the global ``np.random`` state, so any process on any machine rebuilds it.
(The table names modules of the course repository; a student release holds only some.)

===========  ===  ==========================  ===========================================
tag          id   key                         what it draws (where)
===========  ===  ==========================  ===========================================
``NOISE``    0    generation, block           pair noise, 16 pairs a block (es.noise)
``EPISODES`` 1    generation                  the generation's episode seeds (here)
``INIT``     2    (none)                      initial policy parameters (es.policies,
                                              pong.policy)
``INIT``     2    1                           a keypoints policy's mixer (pong.keypoints)
``TABLE``    3    chunk                       the shared noise table, from ``TABLE_SEED``
                                              (es.noise_table)
``OFFSETS``  4    generation                  pairs' offsets into the table (es.noise_table)
===========  ===  ==========================  ===========================================

An episode seed reaches the environment as ``reset(seed=...)`` (gymnasium derives the
environment's own generators from it: es.envs.cartpole, pong.games). The one stream on
purpose *not* rebuildable is the Redis master's choice of members to replay (``secrets``),
so that no worker can predict it.
"""
from __future__ import annotations

import numpy as np

NOISE, EPISODES, INIT, TABLE, OFFSETS = 0, 1, 2, 3, 4


def sequence(seed: int, *key: int) -> np.random.SeedSequence:
    return np.random.SeedSequence(int(seed), spawn_key=tuple(int(k) for k in key))


def rng_for(seed: int, *key: int) -> np.random.Generator:
    """The generator of stream ``key`` of run ``seed``."""
    return np.random.Generator(np.random.PCG64(sequence(seed, *key)))


def episode_seeds(seed: int, generation: int, count: int) -> np.ndarray:
    """The environment seeds of one generation, shared by every member and the center.

    Common random numbers: every member meets the same starting states, so returns differ
    because of the parameters, not because of luck in the draw.
    """
    return sequence(seed, EPISODES, generation).generate_state(count).astype(np.int64)
