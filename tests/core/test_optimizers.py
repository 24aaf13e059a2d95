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
