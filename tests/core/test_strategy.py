import numpy as np
import pytest

import es
from es.optimizers import SGD, Adam
from es.strategy import OpenES


def test_gradient_on_a_quadratic_points_along_the_true_gradient():
    # f(x) = -|x - target|^2, true gradient 2 (target - x).
    target = np.linspace(-1, 1, 50).astype(np.float32)
    x0 = np.zeros(50, dtype=np.float32)
    strategy = OpenES(x0, SGD(50, 0.1), population=2000, sigma=0.05, seed=0, shaping=es.raw)
    task = strategy.ask()
    params = task.member_params(np.arange(task.population))
    returns = -np.sum((params - target) ** 2, axis=1)
    g = strategy.gradient(returns)
    true = 2 * (target - x0)
    cos = g @ true / np.linalg.norm(g) / np.linalg.norm(true)
    assert cos > 0.9, f"cosine {cos:.3f}: the estimate does not follow the true gradient"
    # With raw returns and the 1/sigma factor the estimate has the right scale too.
    assert np.linalg.norm(g) == pytest.approx(np.linalg.norm(true), rel=0.2)


def test_openai_blog_quadratic_converges():
    # https://openai.com/blog/evolution-strategies: solution = [0.5, 0.1, -0.3]
    solution = np.array([0.5, 0.1, -0.3])

    def f(w, seed):
        return -np.sum(np.square(solution - w))

    result = es.optimize(f, np.zeros(3), population=50, sigma=0.1, learning_rate=0.02, generations=300, seed=0)
    assert np.allclose(result.center, solution, atol=0.02), result.center


def test_tell_rejects_wrong_number_of_returns():
    strategy = OpenES(np.zeros(3, dtype=np.float32), Adam(3, 0.1), population=4, sigma=0.1, seed=0)
    strategy.ask()
    with pytest.raises(ValueError, match="one return per member"):
        strategy.tell([1.0, 2.0])


@pytest.mark.parametrize("kwargs, match", [
    (dict(population=4, sigma=0.0), "sigma"),
    (dict(population=4, sigma=-1.0), "sigma"),
    (dict(population=1, sigma=0.1), "population"),
    (dict(population=5, sigma=0.1), "even"),
])
def test_bad_hyperparameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        OpenES(np.zeros(3, dtype=np.float32), Adam(3, 0.1), seed=0, **kwargs)
