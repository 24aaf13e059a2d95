import numpy as np
import pytest

from es.optimizers import SGD, Adam


def test_sgd_momentum_against_hand_computed_values():
    opt = SGD(2, learning_rate=0.1, momentum=0.9)
    theta = np.array([1.0, -1.0], dtype=np.float32)
    theta, _ = opt.update(theta, np.array([1.0, 2.0], dtype=np.float32))
    # v = 0.1 * g = [0.1, 0.2]; step = 0.1 * v
    assert np.allclose(theta, [1.01, -0.98])
    theta, _ = opt.update(theta, np.array([1.0, 2.0], dtype=np.float32))
    # v = 0.9 * [0.1, 0.2] + 0.1 * [1, 2] = [0.19, 0.38]
    assert np.allclose(theta, [1.01 + 0.019, -0.98 + 0.038])


def test_adam_first_steps_against_hand_computed_values():
    opt = Adam(1, learning_rate=0.01)
    theta = np.zeros(1, dtype=np.float32)
    theta, _ = opt.update(theta, np.array([4.0], dtype=np.float32))
    # bias-corrected first step is lr * sign(g)
    assert theta[0] == pytest.approx(0.01, rel=1e-4)
    theta, _ = opt.update(theta, np.array([-2.0], dtype=np.float32))
    m = 0.9 * 0.4 + 0.1 * -2.0
    v = 0.999 * 0.016 + 0.001 * 4.0
    a = 0.01 * np.sqrt(1 - 0.999 ** 2) / (1 - 0.9 ** 2)
    assert theta[0] == pytest.approx(0.01 + a * m / (np.sqrt(v) + 1e-8), rel=1e-4)


def test_weight_decay_shrinks_parameters_not_fitness():
    opt = SGD(2, learning_rate=1.0, momentum=0.0, weight_decay=0.5)
    theta, _ = opt.update(np.array([2.0, -2.0], dtype=np.float32), np.zeros(2, dtype=np.float32))
    assert np.allclose(theta, [1.0, -1.0])


def test_update_ratio_and_state_round_trip():
    opt = Adam(3, learning_rate=0.1)
    theta = np.ones(3, dtype=np.float32)
    theta, ratio = opt.update(theta, np.ones(3, dtype=np.float32))
    assert ratio == pytest.approx(0.1, rel=1e-3)
    clone = Adam(3, learning_rate=0.1)
    clone.load_state_dict(opt.state_dict())
    g = np.array([0.3, -1.0, 2.0], dtype=np.float32)
    assert np.array_equal(opt.update(theta, g)[0], clone.update(theta, g)[0])


def test_adam_step_is_pure_and_steps_up_by_lr_first():
    """The course's float64 Adam as a pure function: the state passed in is never changed, the
    first step is ``lr * sign(g)`` (bias correction), and a zero gradient gives a zero step."""
    from es.optimizers import adam_step
    theta, grad = np.zeros(3), np.array([2.0, -0.5, 0.0])
    new, state = adam_step(theta, grad, None, 0.1)
    assert np.allclose(new, [0.1, -0.1, 0.0], atol=1e-6) and new[2] == 0.0 and state["t"] == 1
    kept = {k: np.copy(v) for k, v in state.items()}
    adam_step(new, grad, state, 0.1)
    assert all(np.array_equal(state[k], kept[k]) for k in state) and np.array_equal(theta, np.zeros(3))


def test_adam_step_and_the_float32_adam_are_one_update():
    """es's two Adams (the strategy's float32 class, the course's float64 function) take the same
    steps over several gradients, to float32's precision: the class weighs ``v`` by ``1 - beta2``
    computed in float32 (1.0000467e-3), so ``v`` differs by 5e-5 relatively and a step by 2e-5 lr."""
    from es.optimizers import adam_step
    rng = np.random.default_rng(0)
    opt, theta32, theta64, state = Adam(5, learning_rate=0.05), np.zeros(5, np.float32), np.zeros(5), None
    for _ in range(6):
        g = rng.standard_normal(5).astype(np.float32)
        theta32, _ = opt.update(theta32, g)
        theta64, state = adam_step(theta64, g, state, 0.05)
    assert np.allclose(theta32, theta64, rtol=0, atol=0.05 * 1e-4)
    assert np.allclose(opt.m, state["m"], rtol=0, atol=1e-6) and np.allclose(opt.v, state["v"], rtol=1e-4, atol=0)
