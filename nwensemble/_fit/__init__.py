"""The fitting engine: from validated arrays and a frozen configuration to
the heads' projections and the keys they attend to (``engine.fit_heads``).

The starting projections (``start``), the objective (``loo_loss``), the
solvers (``lbfgs``, ``adam``, chosen in ``solvers``), the choice of the
ambiguity weight (``diversity``) and the allocation rule (``allocation``).
Nothing here reads an estimator or builds the prediction object.
"""
