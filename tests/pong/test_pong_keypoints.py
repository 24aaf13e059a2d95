"""The keypoints policy (learned filters, a spatial soft-argmax): its fast sparse softmax equals
the dense one, it knows nothing of where Pong's objects are (it is translation-equivariant),
a member's action does not depend on its batch, and training with it is bit-identical for any
number of workers."""
import hashlib
from pathlib import Path

import numpy as np
import pytest

import es
from es.errors import ESError
from pong.keypoints import (_EXP_ZERO, FEATURES_PER_KEYPOINT, PULL_SCALE, VBN_CLIP, VBN_FLOOR, PongKeypointsPolicy,
                            _frames, _quadratic, _unpack, dense_keypoints, frame_keypoints, keypoint_features,
                            reference_batch, sparse_keypoints, window_field, window_tables)
from pong.plugin import validate_spec
from pong.policy import BACKGROUND, make_pong_policy

ROOT = Path(__file__).resolve().parents[2]
PINNED = "eb01c8196da4578a"   # keypoint features on game 11 (test_the_keypoints_are_pinned_bit_for_bit)


def drawn(ball=None, paddle=None, rows=1):
    """(rows, 4, 42, 42) uint8: the background, a 1-pixel ball at ``ball(t) = (row, col)`` and a
    4-pixel bar at ``paddle(t) = (top, col)`` in each of the 4 frames."""
    out = np.repeat(np.repeat(BACKGROUND.astype(np.uint8)[None, None], 4, axis=1), rows, axis=0)
    for t in range(4):
        if ball is not None:
            out[:, t][:, ball(t)[0], ball(t)[1]] = 236
        if paddle is not None:
            top, col = paddle(t)
            out[:, t, top:top + 4, col] = 147
    return out


def game_frames(n=24, seed=3):
    from pong.env import downsample_batch, stack_batch
    from pong.games import PongGames
    seen = []

    def choose(episodes, obs):
        seen.append(obs.copy())
        return np.full(len(episodes), (len(seen) // 7) % 3)
    PongGames(1, downsample_batch, stack_batch).play(choose, [seed], max_steps=400)
    return np.concatenate(seen[::len(seen) // n][:n])


def random_front(policy, rows, rng, pull_scale=0.5):
    filters = rng.standard_normal((rows, policy.keypoints, 9 * policy.channels))
    pulls = rng.standard_normal((rows, policy.keypoints, 2)) * pull_scale
    return filters, pulls


@pytest.mark.parametrize("pull_scale, motion", [(0.0, False), (0.5, False), (3.0, False), (0.5, True)])
def test_the_sparse_softmax_equals_the_dense_one(pull_scale, motion):
    rng = np.random.default_rng(0)
    obs = np.concatenate([game_frames(), drawn(lambda t: (10 + t, 20 - 2 * t), lambda t: (30 - t, 36), rows=2)])
    obs[0, :3] = 0                                            # the empty frames after a reset
    policy = PongKeypointsPolicy(3, motion=motion)
    filters, pulls = random_front(policy, len(obs), rng, pull_scale)
    x = _frames(obs, motion)
    for sparse, dense in zip(sparse_keypoints(x, filters, pulls), dense_keypoints(x, filters, pulls)):
        assert np.allclose(sparse, dense, rtol=1e-9, atol=1e-9)


def test_the_motion_channel_is_the_change_since_the_previous_frame():
    obs = drawn(lambda t: (12, 10 + 3 * t))
    x = _frames(obs, motion=True)
    assert x.shape == (1, 4, 2, 42, 42) and np.array_equal(x[:, :, 0], _frames(obs)[:, :, 0])
    assert not x[0, 0, 1].any()
    assert x[0, 2, 1, 12, 16] > 0 and x[0, 2, 1, 12, 13] < 0 and np.count_nonzero(x[0, 2, 1]) == 2
    policy = PongKeypointsPolicy(2, motion=True)
    filters, _ = _unpack(policy.initial_params(0)[None, :policy.num_front], 2, 2)
    from es.seeding import INIT, rng_for
    identity = filters[0] - np.float32(rng_for(0, INIT).standard_normal((2, 18)) * 0.3)
    assert np.allclose(identity, np.eye(18)[[4, 13]], atol=1e-6)     # keypoint i: the identity on channel i % 2


def test_a_keypoint_finds_a_lone_ball_and_an_empty_field_centres_it():
    ball = drawn(lambda t: (12 + 2 * t, 30 - t))
    filters = np.zeros((1, 1, 9))
    filters[0, 0, 4] = 1.0                                    # the identity: "what differs from the field"
    pulls = np.zeros((1, 1, 2))
    col, row, presence = sparse_keypoints(_frames(ball), filters, pulls)
    assert np.allclose(row[0, 0], [12, 14, 16, 18], atol=0.05) and np.allclose(col[0, 0], [30, 29, 28, 27], atol=0.05)
    assert np.all(presence > 0.99)
    col, row, presence = sparse_keypoints(_frames(drawn()), filters, pulls)
    assert np.allclose(col, 20.5) and np.allclose(row, 20.5) and np.all(presence == 0)


def test_the_front_end_knows_no_place_it_is_translation_equivariant():
    """Shift the ball and a paddle by (dy, dx): with zero pulls every keypoint shifts by exactly
    that. Nothing in the front end depends on where on the screen something is, except what
    the pulls (learned) add."""
    rng = np.random.default_rng(1)
    policy = PongKeypointsPolicy(2)
    filters, _ = random_front(policy, 1, rng)
    filters[..., 4] += 3.0                                    # sharp enough to single out an object
    pulls = np.zeros((1, 2, 2))
    base = sparse_keypoints(_frames(drawn(lambda t: (15 + t, 18 + t), lambda t: (20, 30))), filters, pulls)
    for dy, dx in ((3, -5), (-4, 2), (6, 4)):
        moved = drawn(lambda t: (15 + t + dy, 18 + t + dx), lambda t: (20 + dy, 30 + dx))
        col, row, presence = sparse_keypoints(_frames(moved), filters, pulls)
        assert np.allclose(col, base[0] + dx, atol=1e-6) and np.allclose(row, base[1] + dy, atol=1e-6)
        assert np.allclose(presence, base[2], atol=1e-9)


def test_a_member_acts_the_same_in_any_batch_and_the_spec_rebuilds_the_policy():
    policy = PongKeypointsPolicy(2, (8,))
    f = FEATURES_PER_KEYPOINT * 2
    assert make_pong_policy(policy.spec()).num_params == policy.num_params == 2 * 11 + (f + f * (f + 1) // 2) * 8 + 8 + 8 * 3 + 3
    rng = np.random.default_rng(2)
    obs = game_frames(12)
    params = np.stack([policy.initial_params(i) for i in range(12)])
    params += rng.standard_normal(params.shape).astype(np.float32)
    together = policy.forward(policy.unflatten(params), obs)
    alone = [policy.forward(policy.unflatten(params[i:i + 1]), obs[i:i + 1])[0] for i in range(12)]
    assert list(together) == alone and len(set(together)) > 1
    front = policy.unflatten(params)[0][0]
    assert np.array_equal(policy.features(front, obs)[5], policy.features(front[5:6], obs[5:6])[0])
    assert np.array_equal(policy.initial_params(4), policy.initial_params(4))
    assert not np.array_equal(policy.initial_params(4), policy.initial_params(5))


def test_the_keypoints_are_pinned_bit_for_bit():
    """Features of 300 steps of game 11 with seed 0's initial front end: a run resumed after a
    change here would continue with another policy."""
    from pong.env import downsample_batch, stack_batch
    from pong.games import PongGames
    policy = PongKeypointsPolicy(2)
    front = policy.unflatten(policy.initial_params(0)[None])[0][0]
    seen = []

    def choose(episodes, obs):
        seen.append(policy.features(front, obs))
        return np.full(len(episodes), (len(seen) // 9) % 3)
    PongGames(1, downsample_batch, stack_batch).play(choose, [11], max_steps=300)
    assert hashlib.sha256(np.concatenate(seen).tobytes()).hexdigest()[:16] == PINNED


PINNED_TAPS = {(True, "linear", False): "7967fda0ab39cb7e", (False, "windows", False): "6473c3d06b038023",
               (False, "windows", True): "86e629564d44950c"}


@pytest.mark.parametrize("motion, pull, vbn", sorted(PINNED_TAPS))
def test_per_frame_designs_are_pinned_bit_for_bit(motion, pull, vbn):
    """Features of two games (11 and 12, 300 steps, the memo on) for the per-frame designs of
    attempts 11-15, two perturbed members: a run resumed after a change to how they are
    computed would continue with another policy."""
    from pong.env import downsample_batch, stack_batch
    from pong.games import PongGames
    policy = PongKeypointsPolicy(3, (8,), motion, pull_scale=0.25, conv="taps", pull=pull, vbn=vbn)
    params = policy.initial_params(0)[None] + 0.1 * np.random.default_rng(5).standard_normal((2, policy.num_params))
    front = policy.unflatten(params.astype(np.float32))[0][0]
    memo, seen = policy.new_memo(), []

    def choose(episodes, obs):
        seen.append(policy.features(front[episodes % 2], obs, memo, episodes))
        return np.full(len(episodes), (len(seen) // 9) % 3)
    PongGames(2, downsample_batch, stack_batch).play(choose, [11, 12], max_steps=300)
    assert hashlib.sha256(np.concatenate(seen).tobytes()).hexdigest()[:16] == PINNED_TAPS[motion, pull, vbn]


def test_attempt_14s_trained_front_end_is_pinned_bit_for_bit():
    """The same for attempt 14's checkpoint (narrowed windows, learned filters): attempt 15
    continues from it."""
    from es.checkpoint import load_checkpoint
    from pong.env import downsample_batch, stack_batch
    from pong.games import PongGames
    center, _, _ = load_checkpoint(ROOT / "docs/runs/pong-windows6-vbn-s0/checkpoint.npz")
    policy = PongKeypointsPolicy(6, (8,), False, pull_scale=0.25, conv="taps", pull="windows", vbn=True)
    front = policy.unflatten(center[None].astype(np.float32))[0][0]
    memo, seen = policy.new_memo(), []

    def choose(episodes, obs):
        seen.append(policy.features(front[episodes * 0], obs, memo, episodes))
        return np.full(len(episodes), (len(seen) // 9) % 3)
    PongGames(2, downsample_batch, stack_batch).play(choose, [11, 12], max_steps=300)
    assert hashlib.sha256(np.concatenate(seen).tobytes()).hexdigest()[:16] == "04037b39c382f2b4"


@pytest.mark.parametrize("spec, ok", [({"type": "pong_keypoints"}, True),
                                      ({"type": "pong_keypoints", "keypoints": 3, "hidden": [8, 8]}, True),
                                      ({"type": "pong_keypoints", "keypoints": 0}, False),
                                      ({"type": "pong_keypoints", "keypoints": 9}, False),
                                      ({"type": "pong_keypoints", "keypoints": "2"}, False),
                                      ({"type": "pong_keypoints", "motion": True, "pull_scale": 0.25}, True),
                                      ({"type": "pong_keypoints", "motion": "yes"}, False),
                                      ({"type": "pong_keypoints", "pull_scale": 0.0}, False),
                                      ({"type": "pong_keypoints", "pull_scale": 2.0}, False),
                                      ({"type": "pong_keypoints", "pull_scale": "0.5"}, False),
                                      ({"type": "pong_keypoints", "hidden": [10 ** 9]}, False),
                                      ({"type": "pong_keypoints", "pull": "windows", "conv": "taps"}, True),
                                      ({"type": "pong_keypoints", "pull": "windows"}, False),
                                      ({"type": "pong_keypoints", "pull": "grid", "conv": "taps"}, False),
                                      ({"type": "pong_keypoints", "vbn": True, "conv": "taps"}, True),
                                      ({"type": "pong_keypoints", "vbn": True}, False),
                                      ({"type": "pong_keypoints", "vbn": "yes", "conv": "taps"}, False),
                                      ({"type": "pong_keypoints", "mix": 6}, True),
                                      ({"type": "pong_keypoints", "mix": 17}, False),
                                      ({"type": "pong_keypoints", "mix": -1}, False),
                                      ({"type": "pong_keypoints", "mix": "6"}, False),
                                      ({"type": "pong_keypoints", "mix": True}, False)])
def test_a_worker_checks_a_keypoints_spec_from_the_network(spec, ok):
    if ok:
        validate_spec({"policy": spec})
    else:
        with pytest.raises(ValueError):
            validate_spec({"policy": spec})


def test_the_keypoints_flag_is_checked():
    with pytest.raises(ESError, match="--keypoints"):
        es.config_for("pong", extra={"policy": "keypoints", "keypoints": 0})
    with pytest.raises(ESError, match="--policy keypoints"):
        es.config_for("pong", extra={"policy": "objects", "keypoints": 3})
    with pytest.raises(ESError, match="--inputs"):
        es.config_for("pong", extra={"policy": "keypoints", "inputs": "pixels"})
    for key, flag, bad, taps_only, other_policy in (("pull", "--pull", "grid", "windows", "dense"),
                                                    ("head_inputs", "--head-inputs", "bn", "vbn", "objects")):
        with pytest.raises(ESError, match=f"{flag} must be"):
            es.config_for("pong", extra={"policy": "keypoints", key: bad})
        with pytest.raises(ESError, match="--policy keypoints"):
            es.config_for("pong", extra={"policy": other_policy, key: taps_only})
        with pytest.raises(ESError, match=f"{flag} {taps_only} needs"):
            es.config_for("pong", extra={"policy": "keypoints", key: taps_only, "keypoint_conv": "blas"})
    with pytest.raises(ValueError, match="needs conv"):
        PongKeypointsPolicy(3, pull="windows")
    with pytest.raises(ValueError, match="vbn needs conv"):
        PongKeypointsPolicy(3, vbn=True)
    from pong.plugin import make_problem
    spec = make_problem(es.config_for("pong", hidden=[8], extra={"policy": "keypoints", "pull": "windows",
                                                                 "head_inputs": "vbn"}), True).policy_spec
    assert spec["vbn"] is True and spec["pull"] == "windows" and make_pong_policy(spec).vbn
    for bad in (-1, 17, "6"):
        with pytest.raises(ESError, match="--mix must be"):
            es.config_for("pong", extra={"policy": "keypoints", "mix": bad})
    with pytest.raises(ESError, match="--policy keypoints"):
        es.config_for("pong", extra={"policy": "objects", "mix": 6})
    spec = make_problem(es.config_for("pong", hidden=[8], extra={"policy": "keypoints", "mix": 6}), True).policy_spec
    assert spec["mix"] == 6 and make_pong_policy(spec).mix == 6
    assert "mix" not in make_problem(es.config_for("pong", extra={"policy": "keypoints"}), True).policy_spec


def test_a_mixer_mixes_the_normalized_features_into_few_head_inputs():
    """``mix``: the head reads M learned mixtures of the (vbn-normalized) features and their
    products. Six windows and M = 6: 27 head inputs and 509 parameters, not 495 and 4,067; the
    mixer's own layer in ``unflatten``; at the start each mixture has about unit spread on the
    reference batch; a member acts the same in any batch, and the spec rebuilds the policy."""
    policy = PongKeypointsPolicy(6, (8,), conv="taps", pull="windows", pull_scale=PULL_SCALE, vbn=True, mix=6)
    assert policy.num_features == 27 and policy.num_front == 72 and policy.num_mix == 30 * 6 + 6
    assert policy.num_params == 72 + 186 + 27 * 8 + 8 + 8 * 3 + 3 == 509
    assert make_pong_policy(policy.spec()).num_params == 509 and policy.spec()["mix"] == 6
    p0 = policy.initial_params(0)
    unmixed = PongKeypointsPolicy(6, (8,), conv="taps", pull="windows", pull_scale=PULL_SCALE, vbn=True)
    assert np.array_equal(p0[:72], unmixed.initial_params(0)[:72])        # the same windows
    (front,), (w, b), *head = policy.unflatten(p0[None])
    assert w.shape == (1, 30, 6) and b.shape == (1, 1, 6) and [a.shape for a, _ in head] == [(1, 27, 8), (1, 8, 3)]
    assert np.allclose(np.square(w[0]).sum(axis=0), 1, atol=1e-5) and not b.any()
    ref = reference_batch()
    f = policy.features(np.repeat(front, len(ref), 0), ref, mixer=(np.repeat(w, len(ref), 0), np.repeat(b, len(ref), 0)))
    z = f[:, :6].astype(np.float64)
    assert np.all((z.std(axis=0) > 0.3) & (z.std(axis=0) < 2))
    i, j = np.triu_indices(6)
    assert np.allclose(f[:, 6:], z[:, i] * z[:, j], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="mixer"):
        policy.features(front, ref[:1])
    rng = np.random.default_rng(5)
    params = (p0[None] + 0.1 * rng.standard_normal((8, policy.num_params))).astype(np.float32)
    obs = game_frames(8)
    together = policy.forward(policy.unflatten(params), obs, policy.new_memo(), np.arange(8))
    alone = [policy.forward(policy.unflatten(params[k:k + 1]), obs[k:k + 1])[0] for k in range(8)]
    assert list(together) == alone
    assert not np.array_equal(policy.initial_params(1)[72:258], p0[72:258])
    with pytest.raises(ValueError, match="mix must be"):
        PongKeypointsPolicy(6, mix=17)


def test_new_runs_scale_the_pulls_and_an_old_spec_keeps_its_own():
    """Attempt 9's checkpoints (pull scale 1, no field in the spec) play as they trained."""
    from pong.plugin import make_problem
    problem = make_problem(es.config_for("pong", hidden=[16], extra={"policy": "keypoints", "inputs": "frames+motion"}), True)
    assert problem.policy_spec == {"type": "pong_keypoints", "keypoints": 2, "hidden": [16], "pull_scale": 0.25,
                                   "motion": True, "conv": "taps"}
    assert make_pong_policy({"type": "pong_keypoints"}).pull_scale == 1.0


def test_a_run_started_before_taps_resumes_with_its_own_sums():
    """Attempts 10 and 11's configs lack keypoint_conv: resumed, they keep the BLAS sums they
    trained with; a new run's config says taps."""
    from pong.plugin import make_problem
    assert es.config_for("pong", extra={"policy": "keypoints"}).extra["keypoint_conv"] == "taps"
    old = es.config_for("pong", hidden=[16], extra={"policy": "keypoints"})
    del old.extra["keypoint_conv"]
    problem = make_problem(old, True)
    assert "conv" not in problem.policy_spec and problem.policy.conv == "blas"
    assert problem.policy.new_memo() is None
    with pytest.raises(ESError, match="keypoint_conv"):
        es.config_for("pong", extra={"policy": "keypoints", "keypoint_conv": "fft"})
    with pytest.raises(ValueError):
        validate_spec({"policy": {"type": "pong_keypoints", "conv": "fft"}})


@pytest.mark.parametrize("motion", [False, True])
def test_per_frame_sums_equal_the_dense_softmax_and_depend_on_their_frame_alone(motion):
    """``frame_keypoints`` (conv taps): the dense softmax's values, and each frame's keypoints
    bit for bit the same whatever other frames share its batch (BLAS's sums are not: a
    frame's rounding there depends on how many windows its stack holds)."""
    rng = np.random.default_rng(1)
    obs = np.concatenate([game_frames(), drawn(lambda t: (10 + t, 20 - 2 * t), lambda t: (30 - t, 36), rows=2)])
    obs[0, :3] = 0
    policy = PongKeypointsPolicy(3, motion=motion, conv="taps")
    filters, pulls = random_front(policy, len(obs), rng)
    x = _frames(obs, motion)
    r, f = np.nonzero(np.ones(x.shape[:2], dtype=bool))
    together = frame_keypoints(x[r, f], filters[r], pulls[r])
    for got, want in zip(together, dense_keypoints(x, filters, pulls)):
        assert np.allclose(got.reshape(len(obs), 4, 3).transpose(0, 2, 1), want, rtol=1e-9, atol=1e-9)
    for i in rng.choice(len(r), 25, replace=False):
        alone = frame_keypoints(x[r[i:i + 1], f[i:i + 1]], filters[r[i:i + 1]], pulls[r[i:i + 1]])
        assert all(np.array_equal(a[0], t[i]) for a, t in zip(alone, together)), i


def windows_case(keypoints: int, motion: bool, rng):
    """A windows policy (taps) with random members on game frames, two drawn rows and a reset
    (3 empty frames): the policy, obs, params, its filters and window tables, ``_frames``, and
    every (row, frame) as ``r, f``."""
    obs = np.concatenate([game_frames(), drawn(lambda t: (10 + t, 20 - 2 * t), lambda t: (30 - t, 36), rows=2)])
    obs[0, :3] = 0
    policy = PongKeypointsPolicy(keypoints, motion=motion, conv="taps", pull="windows", pull_scale=PULL_SCALE)
    params = policy.initial_params(0)[None] + rng.standard_normal((len(obs), policy.num_params)).astype(np.float32)
    filters, raw = _unpack(policy.unflatten(params)[0][0], keypoints, policy.channels, 3)
    x = _frames(obs, motion)
    r, f = np.nonzero(np.ones(x.shape[:2], dtype=bool))
    return policy, obs, params, filters, window_tables(raw, PULL_SCALE), x, r, f


@pytest.mark.parametrize("motion", [False, True])
def test_windows_equal_the_dense_softmax_and_depend_on_their_frame_alone(motion):
    """A windows policy's keypoints (``window_tables``: a window along the columns, a
    pull along the rows) are the dense softmax's under the same logits, per frame, bit for bit
    whatever else shares the batch."""
    rng = np.random.default_rng(5)
    policy, obs, params, filters, tables, x, r, f = windows_case(4, motion, rng)
    together = frame_keypoints(x[r, f], filters[r], tables[r])
    for got, want in zip(together, dense_keypoints(x, filters, tables)):
        assert np.allclose(got.reshape(len(obs), 4, 4).transpose(0, 2, 1), want, rtol=1e-9, atol=1e-9)
    for got, want in zip(policy.keypoints_of(policy.unflatten(params)[0][0], obs), dense_keypoints(x, filters, tables)):
        assert np.allclose(got, want, rtol=1e-9, atol=1e-9)
    for i in rng.choice(len(r), 20, replace=False):
        alone = frame_keypoints(x[r[i:i + 1], f[i:i + 1]], filters[r[i:i + 1]], tables[r[i:i + 1]])
        assert all(np.array_equal(a[0], t[i]) for a, t in zip(alone, together)), i


def test_the_looked_up_field_gives_the_computed_one_bit_for_bit():
    """``frame_keypoints`` with a memo's ``window_field`` (which skips the pixels where both
    exponentials are 0: ``exact.exp`` is exactly 0 below ``_EXP_ZERO``) equals the same call
    with the window tables, whose every exponential is computed, bit for bit."""
    with np.errstate(over="ignore"):     # -1e300's reduction overflows on the way to its exact 0
        assert not es.exact.exp(np.array([np.nextafter(_EXP_ZERO, 0), _EXP_ZERO, -1e300, -np.inf])).any()
    _, _, _, filters, tables, x, r, f = windows_case(6, True, np.random.default_rng(6))
    computed = frame_keypoints(x[r, f], filters[r], tables[r])
    looked_up = frame_keypoints(x[r, f], filters[r], None, (window_field(tables), r))
    assert all(np.array_equal(a, b) for a, b in zip(computed, looked_up))


def test_windows_start_tiling_the_field_evenly_and_each_sees_its_own_stretch():
    """Before training, window ``i`` of ``k`` is centred on the ``i``-th of ``k`` equal column
    stretches with the identity filter: a lone ball as bright as Pong's (63 above the field)
    is present in the window whose stretch holds it and absent from the others; near an edge
    the two windows share it; an empty field puts every keypoint at its window's centre. The
    tiling is the same for any picture: nothing in it knows where Pong's paddles are."""
    policy = PongKeypointsPolicy(3, conv="taps", pull="windows", pull_scale=PULL_SCALE)
    front = policy.unflatten(policy.initial_params(0)[None])[0][0]
    filters, raw = _unpack(front, 3, 1, 3)
    assert np.allclose(PULL_SCALE * raw[0, :, 0], [-2 / 3, 0, 2 / 3]) and not raw[0, :, 1:].any()
    assert np.array_equal(filters[0], np.eye(9)[[4, 4, 4]])
    col, row, presence = policy.keypoints_of(front, drawn())
    assert np.allclose(col[0, :, 3], 20.5 + 20.5 * np.array([-2 / 3, 0, 2 / 3]), atol=0.2)
    assert np.allclose(row, 20.5) and not presence.any()
    for ball_col in range(42):
        obs = drawn()
        obs[0, :, 25, ball_col] = BACKGROUND[25, ball_col] + 63
        col, row, presence = policy.keypoints_of(front, obs)
        inside = [i for i in range(3) if abs(ball_col - 20.5 * (1 + (2 * i + 1) / 3 - 1)) < 20.5 / 3 / 2]
        for i in inside:           # in the middle half of window i: it holds the ball, the others do not see it
            assert presence[0, i, 3] > 0.9 and np.delete(presence[0, :, 3], i).max() < 0.02, (ball_col, presence)
            assert abs(row[0, i, 3] - 25) < 0.3 and abs(col[0, i, 3] - ball_col) < 0.3
        assert presence[0, :, 3].max() > 0.8, ball_col                   # and near an edge, someone sees it


def test_the_reference_batch_is_what_its_script_makes():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "scripts" / "make_pong_reference.py"
    spec = importlib.util.spec_from_file_location("make_pong_reference", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert np.array_equal(script.compute_reference(), reference_batch())
    assert reference_batch().shape == (64, 4, 42, 42) and (_frames(reference_batch()) != 0).any(axis=(1, 2, 3, 4)).all()


def test_virtual_batch_normalization_centres_each_members_inputs_on_the_reference_batch():
    """vbn: with each member's own parameters, its head's inputs over the reference batch have
    mean 0 and spread 1 (where they vary by more than the floor and none is clipped), whatever
    else is in the batch;
    on game frames they are those raw inputs, centred and scaled the same way and clipped."""
    policy = PongKeypointsPolicy(4, (8,), conv="taps", pull="windows", pull_scale=PULL_SCALE, vbn=True)
    rng = np.random.default_rng(4)
    params = (policy.initial_params(0)[None] + 0.1 * rng.standard_normal((6, policy.num_params))).astype(np.float32)
    front = policy.unflatten(params)[0][0]
    ref = reference_batch()
    raw = PongKeypointsPolicy(4, (8,), conv="taps", pull="windows", pull_scale=PULL_SCALE)
    for i in (0, 5):
        on_ref = raw.features(np.repeat(front[i:i + 1], len(ref), 0), ref).astype(np.float64)
        z = policy.features(np.repeat(front[i:i + 1], len(ref), 0), ref).astype(np.float64)
        varies = (on_ref.std(axis=0) > 2 * VBN_FLOOR) & (np.abs(z) < VBN_CLIP).all(axis=0)   # not floored, not clipped
        assert varies.sum() > 50
        assert np.allclose(z[:, varies].mean(axis=0), 0, atol=0.05)
        assert np.allclose(z[:, varies].std(axis=0), 1, atol=0.05)
    obs = game_frames(6)
    together = policy.features(front, obs, policy.new_memo(), np.arange(6))
    alone = np.concatenate([policy.features(front[i:i + 1], obs[i:i + 1]) for i in range(6)])
    assert np.array_equal(together, alone) and np.abs(together).max() <= VBN_CLIP
    q = _quadratic(keypoint_features(*raw.keypoints_of(front[:1], obs[:1])))
    r = _quadratic(keypoint_features(*raw.keypoints_of(np.repeat(front[:1], len(ref), 0), ref)))
    want = np.clip((q - r.mean(0)) / np.maximum(r.std(0), VBN_FLOOR), -VBN_CLIP, VBN_CLIP)
    assert np.allclose(together[0], want[0], atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("motion, pull, vbn", [(False, "linear", False), (True, "linear", False),
                                               (False, "windows", False), (False, "windows", True)])
def test_the_memo_reuses_frames_without_changing_a_bit(motion, pull, vbn):
    """Games played with the memo (frames of the previous step reused) and without it: the
    same features at every step, the same scores; slots reused by new episodes included."""
    from pong.problem import PongProblem
    problem = PongProblem({"type": "pong_keypoints", "keypoints": 3, "hidden": [8], "pull_scale": 0.25,
                           "motion": motion, "conv": "taps", "pull": pull, "vbn": vbn}, max_steps=150, num_envs=3)
    policy = problem.policy
    params = (policy.initial_params(0)[None] + 0.1 * np.random.default_rng(3).standard_normal((4, policy.num_params)))
    layers_all = policy.unflatten(params.astype(np.float32))
    from pong.env import downsample_batch, stack_batch
    from pong.games import PongGames
    seen = {}
    for memo in (None, policy.new_memo()):
        features = []

        def choose(episodes, obs):
            layers = [tuple(a[episodes % 4] for a in layer) for layer in layers_all]
            f = policy.features(layers[0][0], obs, memo, episodes)
            features.append(f)
            return policy.head.forward(layers[1:], f)
        scores = PongGames(3, downsample_batch, stack_batch).play(choose, np.arange(7), max_steps=150)
        seen[memo is None] = (np.concatenate(features), scores)
    assert np.array_equal(seen[True][0], seen[False][0]) and len(seen[True][0]) > 900
    assert all(np.array_equal(a, b) for a, b in zip(seen[True][1], seen[False][1]))
    # and the problem itself plays with the memo: its scores are the memo-less ones
    ret, length = problem.run_episodes(params.astype(np.float32), np.arange(7) % 4, np.arange(7))
    assert np.array_equal(ret, seen[True][1][0] + 0) and np.array_equal(length, seen[True][1][1])


@pytest.mark.slow
@pytest.mark.parametrize("conv, pull, head_inputs", [("blas", "linear", "raw"), ("taps", "linear", "raw"),
                                                     ("taps", "windows", "raw"), ("taps", "windows", "vbn"),
                                                     ("taps", "windows", "vbn+mix")])
def test_training_is_bit_identical_on_one_process_and_on_two_workers(conv, pull, head_inputs):
    runs = []
    for workers in (1, 2):
        cfg = es.config_for("pong", seed=4, generations=2, population=8, max_steps=120, workers=workers,
                            hidden=[8], extra={"policy": "keypoints", "keypoints": 2, "num_envs": 4,
                                               "keypoint_conv": conv, "pull": pull,
                                               "head_inputs": head_inputs.split("+")[0],
                                               **({"mix": 3} if "mix" in head_inputs else {})},
                            reward_goal=1e9, sigma=0.1)
        runs.append(es.train(cfg, final_eval=False))
    assert np.array_equal(runs[0].center, runs[1].center)
    assert [m["center_return"] for m in runs[0].metrics] == [m["center_return"] for m in runs[1].metrics]


def test_a_keypoints_policy_plays_one_chunk_per_worker_a_dense_one_guided_chunks():
    """The keypoints forward pass has a fixed cost per call that every chunk pays at each step,
    so its generations are cut evenly, one chunk per worker; the dense policy's stay guided."""
    from es.parallel import ParallelEvaluator
    from pong.problem import PongProblem
    for policy, want in (({"type": "pong_keypoints"}, [(0, 32), (32, 64)]), (None, None)):
        problem = PongProblem(policy)
        ev = ParallelEvaluator(problem, workers=2, adaptive=False)
        try:
            bounds = ev.bounds(64)
        finally:
            ev.close()
        if want is not None:
            assert problem.chunks_per_worker == 1 and bounds == want, bounds
        else:
            assert problem.chunks_per_worker == 4 and ev.guided and len(bounds) > 2, bounds
