"""The prediction side: the fitted model as a value built once at the end of
``fit`` (``predictor.NWPredictor``), how its heads combine
(``combination``), and what it computes beyond point predictions (conformal
``intervals``, the ``bvc`` moments)."""
