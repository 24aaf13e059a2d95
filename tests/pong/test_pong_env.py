"""Pong observations: shape, range, frame order, reset, seeding, and train/eval equality."""
import sys
from pathlib import Path

import numpy as np
import pytest

from pong.env import PONG_ACTIONS, downsample, make_pong, make_pong_vector

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def env():
    e = make_pong(seed=1)
    yield e
    e.close()


def test_observation_shape_dtype_range_and_reset_frames(env):
    obs, _ = env.reset(seed=1)
    assert obs.shape == (4, 42, 42) and obs.dtype == np.float32
    assert env.observation_space.contains(obs)
    assert np.all(obs[:3] == 0), "3 zero frames after reset"
    assert 0 < obs[3].mean() < 1 and obs.min() >= 0 and obs.max() <= 1
    assert env.action_space.n == 3


def test_frames_are_stacked_oldest_first(env):
    obs, _ = env.reset(seed=2)
    ale = env.unwrapped.ale
    history = [obs[3].copy()]
    for a in (1, 1, 2, 0, 1):
        obs, *_ = env.step(a)
        newest = downsample(ale.getScreenGrayscale()) / np.float32(255)
        assert np.array_equal(obs[3], newest)
        history.append(obs[3].copy())
    for i in range(4):
        assert np.array_equal(obs[i], history[-4 + i])


def test_same_seed_same_frames():
    a, b = make_pong(seed=7), make_pong(seed=7)
    oa, _ = a.reset()
    ob, _ = b.reset()
    rng = np.random.default_rng(0)
    for _ in range(60):
        assert np.array_equal(oa, ob)
        act = int(rng.integers(3))
        oa, ra, *_ = a.step(act)
        ob, rb, *_ = b.step(act)
        assert ra == rb


def test_vector_env_gives_the_same_observations_as_make_pong():
    single = make_pong(seed=3, repeat_action_probability=0.0)
    vec = make_pong_vector(1, repeat_action_probability=0.0)
    obs, _ = single.reset()
    vobs, _ = vec.reset(seed=np.array([3]))
    rng = np.random.default_rng(1)
    for _ in range(300):
        assert np.array_equal(np.rint(obs * 255).astype(np.uint8), vobs[0])
        a = int(rng.integers(3))
        obs, r, *_ = single.step(a)
        vobs, vr, *_ = vec.step(PONG_ACTIONS[[a]])
        assert r == vr[0]
    vec.close()


def test_shipped_background_is_what_the_script_computes():
    sys.path.insert(0, str(ROOT / "scripts"))
    from make_pong_background import compute_background
    assert np.array_equal(np.load(ROOT / "pong" / "background.npy"), compute_background())
