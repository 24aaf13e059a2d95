"""The objects policy: what its fixed first stage reads off the pixels, checked on drawn
frames and against what the game itself holds (ALE's RAM)."""
import numpy as np
import pytest

from pong.policy import (BACKGROUND, OBJECT_NAMES, PongObjectsPolicy, make_pong_policy, object_features,
                         quadratic_features)

BALL, PADDLE = 236, 147
PINNED = "fc695ba77607a49c"   # object_features on game 11 (test_the_features_are_pinned_bit_for_bit)


def frames(ball_at=None, paddle_rows=None, opponent_rows=None, steps=4):
    """(1, 4, 42, 42) uint8: the background with a 1-pixel ball at ``ball_at(t) -> (row, col)``
    and paddles covering rows ``paddle_rows(t)`` of columns 36-37 (ours) and 4-5."""
    out = np.repeat(BACKGROUND.astype(np.uint8)[None], steps, axis=0)
    for t in range(steps):
        if ball_at is not None and ball_at(t) is not None:
            out[t][ball_at(t)] = BALL
        if paddle_rows is not None:
            out[t, paddle_rows(t), 36:38] = PADDLE
        if opponent_rows is not None:
            out[t, opponent_rows(t), 4:6] = PADDLE
    return out[None]


def named(f):
    return dict(zip(OBJECT_NAMES, f[0]))


def test_a_moving_ball_and_paddles_are_read_off_the_frames():
    f = named(object_features(frames(lambda t: (10 + 2 * t, 20 - t), lambda t: slice(20 + 3 * t, 24 + 3 * t),
                                     lambda t: slice(14, 18))))
    assert f["ball_seen"] == 1
    assert f["ball_y"] == pytest.approx((16 - 22) / 10) and f["ball_x"] == pytest.approx((17 - 22) / 10)
    assert f["ball_vy"] == pytest.approx(2) and f["ball_vx"] == pytest.approx(-1)
    assert f["paddle_y"] == pytest.approx((30.5 - 22) / 10) and f["paddle_vy"] == pytest.approx(3 / 3)
    assert f["opponent_y"] == pytest.approx((15.5 - 22) / 10)


def test_a_ball_out_of_sight_gives_zeros_and_a_ball_seen_twice_a_velocity():
    gone = named(object_features(frames(lambda t: (12, 12) if t < 3 else None)))
    assert gone["ball_seen"] == 0 and gone["ball_y"] == gone["ball_vy"] == gone["ball_x"] == 0
    late = named(object_features(frames(lambda t: (30, 8 + 2 * t) if t >= 2 else None)))   # a new serve
    assert late["ball_seen"] == 1 and late["ball_vx"] == pytest.approx(2) and late["ball_vy"] == 0


def test_the_score_digits_and_walls_are_not_objects():
    obs = frames()
    obs[0, :, 0:4, :] = 255 - obs[0, :, 0:4, :]      # a changed score row and more
    obs[0, :, 38:42, :] = 0                          # the bottom wall
    assert named(object_features(obs))["ball_seen"] == 0


def test_features_of_a_row_do_not_depend_on_its_batch():
    rng = np.random.default_rng(3)
    obs = np.concatenate([frames(lambda t: (int(r) + t, int(c) - t), lambda t: slice(int(p), int(p) + 4))
                          for r, c, p in rng.integers([8, 10, 8], [30, 34, 34], (7, 3))])
    batch = object_features(obs)
    assert all(np.array_equal(object_features(obs[i:i + 1])[0], batch[i]) for i in range(len(obs)))
    q = quadratic_features(batch)
    k = len(OBJECT_NAMES)
    assert q.shape == (7, k + k * (k + 1) // 2)
    assert np.allclose(q[:, k + 1], batch[:, 0] * batch[:, 1])     # the products follow the features


def test_the_policy_is_batched_per_member_and_rebuilt_from_its_spec():
    policy = PongObjectsPolicy((8,))
    assert make_pong_policy(policy.spec()).num_params == policy.num_params == 44 * 8 + 8 + 8 * 3 + 3
    rng = np.random.default_rng(0)
    obs = np.concatenate([frames(lambda t, i=i: (10 + i + t, 12 + 2 * i), lambda t, i=i: slice(8 + 2 * i, 12 + 2 * i))
                          for i in range(9)])
    params = np.stack([policy.initial_params(i) for i in range(9)]) + rng.standard_normal((9, policy.num_params)).astype(np.float32)
    together = policy.forward(policy.unflatten(params), obs)
    assert list(together) == [policy.forward(policy.unflatten(params[i:i + 1]), obs[i:i + 1])[0] for i in range(9)]
    assert len(set(together)) > 1


def test_the_features_follow_what_the_game_holds():
    """Over 800 steps of a real game (ALE/Pong-v5's dynamics, a policy that moves the paddle up
    and down), the features track ALE's own RAM: ball height and column, our paddle, theirs."""
    from pong.env import downsample_batch, stack_batch
    from pong.games import FRAMESKIP, PONG_ACTIONS, StartStates, _new_ale
    ale = _new_ale(12345)
    ale.reset_game()
    ale.restoreState(StartStates()(3))
    acts = ale.getMinimalActionSet()
    screen = np.empty((210, 160), np.uint8)
    ale.getScreenGrayscale(screen)
    obs = stack_batch(np.zeros((1, 4, 42, 42), np.uint8), downsample_batch(screen[None]))
    ram, feats = [], []
    for t in range(800):
        ram.append(ale.getRAM()[[54, 49, 51, 50]].astype(float))     # ball y, ball x, our y, their y
        feats.append(object_features(obs)[0])
        for _ in range(FRAMESKIP):
            ale.act(acts[PONG_ACTIONS[(t // 15) % 3]])
        ale.getScreenGrayscale(screen)
        obs = stack_batch(obs, downsample_batch(screen[None]))
    ram, feats = np.array(ram), np.array(feats)
    seen = feats[:, 0] == 1
    assert seen.mean() > 0.4
    for col, ram_col in ((1, 0), (2, 1)):
        assert np.corrcoef(feats[seen, col], ram[seen, ram_col])[0, 1] > 0.95
    in_field = (ram[:, 2] > 45) & (ram[:, 2] < 195)     # paddles hidden partly behind a wall are biased
    assert np.corrcoef(feats[in_field, 5], ram[in_field, 2])[0, 1] > 0.95
    assert np.corrcoef(feats[:, 7], ram[:, 3])[0, 1] > 0.95


def test_the_features_are_pinned_bit_for_bit():
    """The features of 300 steps of game 11 (a fixed up/down pattern), hashed: a run resumed
    after a change here would continue with another policy."""
    import hashlib
    from pong.env import downsample_batch, stack_batch
    from pong.games import PongGames
    seen = []

    def choose(episodes, obs):
        seen.append(object_features(obs))
        return np.full(len(episodes), (len(seen) // 9) % 3)
    PongGames(1, downsample_batch, stack_batch).play(choose, [11], max_steps=300)
    assert hashlib.sha256(np.concatenate(seen).tobytes()).hexdigest()[:16] == PINNED
