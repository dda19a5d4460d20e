"""What the host's two sweeps share: the ensemble's loss from every head's
estimates and its derivative, the chunks and the rows of a block."""

import numpy as np
import pytest

from nwensemble._fit.sweep_ensemble_loss import (
    add_in_order,
    chunk_count,
    ensemble_loss,
    ensemble_upstream,
    rows_within,
)


@pytest.mark.parametrize("n_heads, diversity", [(1, 0.0), (3, 0.0), (3, 0.4)])
def test_the_upstream_is_the_losss_derivative(n_heads, diversity):
    rng = np.random.default_rng(0)
    Y_heads = rng.standard_normal((n_heads, 7, 2))
    Y = rng.standard_normal((7, 2))
    sw = rng.uniform(0.0, 1.0, 7)
    U = ensemble_upstream(Y_heads, Y, sw, diversity)
    step = 1e-6
    numeric = np.zeros_like(Y_heads)
    for index in np.ndindex(*Y_heads.shape):
        up, down = Y_heads.copy(), Y_heads.copy()
        up[index] += step
        down[index] -= step
        loss_up = ensemble_loss(up, Y, sw, diversity)
        numeric[index] = (loss_up - ensemble_loss(down, Y, sw, diversity)) / (2 * step)
    np.testing.assert_allclose(U, numeric, rtol=1e-6, atol=1e-9)


def test_chunks_and_blocks():
    assert [chunk_count(n) for n in (10, 255, 256, 600, 1024, 10**6)] == [
        1,
        1,
        1,
        2,
        4,
        8,
    ]
    assert rows_within(1 << 20, 4096 * 4) == 64
    assert rows_within(1 << 20, 10**7) == 8
    assert rows_within(1 << 20, 4) == 256
    parts = [np.float32(1e8), np.float32(1.0), np.float32(-1e8)]
    assert add_in_order(parts) == (parts[0] + parts[1]) + parts[2]
