"""The scaling guide's dask recipe, run as written on a two-worker
LocalCluster: block-wise predictions equal the model's own on each block,
with the workers' BLAS threads."""

import os
import re

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from threadpoolctl import threadpool_limits

GUIDE = os.path.join(
    os.path.dirname(__file__), "..", "docs", "user_guide", "scaling.rst"
)
SECTION = "Batch prediction on a dask cluster"


def recipe():
    """The first code block of the guide's dask section, dedented."""
    with open(GUIDE) as fh:
        text = fh.read()
    section = text[text.index(SECTION) :]
    block = re.search(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", section)
    return "\n".join(line[3:] for line in block.group(1).splitlines())


@pytest.mark.slow
def test_dask_recipe_equals_local_prediction():
    pytest.importorskip("dask.distributed")
    pytest.importorskip("dask.dataframe")
    scope = {}
    exec(compile(recipe(), GUIDE, "exec"), scope)
    model, X, queries = scope["model"], scope["X"], scope["queries"]

    edges = np.cumsum((0,) + queries.chunks[0])
    blocks = [X[1000 + a : 1000 + b] for a, b in zip(edges[:-1], edges[1:])]
    assert len(blocks) == 5
    # dask's workers run BLAS on one thread per worker thread: the same here.
    with threadpool_limits(limits=1):
        local = [model.predict(b) for b in blocks]
        pairs = [model.predict(b, return_std=True) for b in blocks]
        X_new = [model.transform(b) for b in blocks]
    assert_array_equal(scope["y_pred"], np.concatenate(local))
    assert_array_equal(scope["pred_std"][:, 0], np.concatenate([p for p, _ in pairs]))
    assert_array_equal(scope["pred_std"][:, 1], np.concatenate([s for _, s in pairs]))
    assert_array_equal(scope["X_new"], np.concatenate(X_new))
    # The frame's partitions are the same five blocks of 1000 rows.
    assert_array_equal(scope["y_frame"].to_numpy(), scope["y_pred"])
    assert_array_equal(scope["y_frame"].index, np.arange(5000))
    # One call over all queries differs from the blocks' by rounding only; the
    # local-linear readout's per-query solve can amplify it to ~1e-12.
    assert_allclose(scope["y_pred"], model.predict(X[1000:]), rtol=1e-10)
