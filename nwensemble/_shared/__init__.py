"""What fitting and prediction share: array namespaces and devices, the
attention blocks, the kernels and the passes over the keys that each kernel
chooses, the feature map and the training rows' copies.

Layers: the estimators (``nwensemble._base`` and its subclasses) call the
fitting engine (``nwensemble._fit``) and build the prediction side
(``nwensemble._predict``); both of those build on this package, which
imports neither.
"""
