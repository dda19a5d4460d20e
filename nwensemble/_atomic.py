"""Atomic ``fit``: an estimator keeps its previous fitted state (or none)
when ``fit`` raises or is interrupted."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import functools


def atomic_fit(fit):
    """Decorate ``fit`` so that any exception, ``KeyboardInterrupt``
    included, puts the estimator's attributes back as they were.

    A fit builds its attributes one after the other (scikit-learn's
    ``validate_data`` sets ``n_features_in_`` first), so without this an
    interrupted fit would leave a mix that ``check_is_fitted`` accepts and
    ``predict`` cannot use. Fits replace attributes rather than change the
    arrays they hold, so restoring the attribute dictionary is enough.
    """

    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        saved = dict(vars(self))
        try:
            return fit(self, *args, **kwargs)
        except BaseException:
            vars(self).clear()
            vars(self).update(saved)
            raise

    return wrapper
