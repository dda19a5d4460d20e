"""The training rows as the attention's keys: one frozen value that every
pass over them reads."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from dataclasses import dataclass
from typing import Any

from nwensemble._shared.attention import log_weights
from nwensemble._shared.backend import namespace_of
from nwensemble._shared.readout import CONSTANT


@dataclass(frozen=True, eq=False)
class Keys:
    """Projected training rows with their targets and weights, the kernel
    that turns their scores into weights, and how the columns split into
    heads.

    Attributes
    ----------
    Z : array of shape (n, n_heads * head_dim)
        The rows projected by every head, side by side: head ``h`` is
        columns ``h * head_dim`` to ``(h + 1) * head_dim - 1``.
    Y : array of shape (n, t)
        Their targets.
    log_sw : array of shape (n,)
        Log sample weights, ``-inf`` for rows of weight zero.
    kernel : Kernel
        The kernel object (see ``kernels``); it chooses how passes run.
    n_heads : int
    support_index : list of SupportIndex or None
        What the kernel searches the keys with (a compact kernel's radius
        search per head), or None.
    readout : Readout or tuple of Readout
        How each head reads its estimate out of its attention (see
        ``readout``): one for every head, or one per head (a fit with
        members, each with its own ridge; all of one kind: lines,
        quadratics or the weighted mean).
    """

    Z: Any
    Y: Any
    log_sw: Any
    kernel: Any
    n_heads: int
    support_index: Any = None
    readout: Any = CONSTANT

    @classmethod
    def of(cls, Z, Y, sample_weight, *, kernel, n_heads, readout=CONSTANT):
        """Keys of rows ``Z`` with targets ``Y`` and (linear) weights."""
        xp, _ = namespace_of(Z)
        log_sw = log_weights(sample_weight, xp=xp)
        return cls(Z, Y, log_sw, kernel, n_heads, readout=readout)

    def readout_of(self, h):
        """Head ``h``'s readout."""
        readout = self.readout
        return readout[h] if isinstance(readout, tuple) else readout

    @property
    def reads_mean(self):
        """Whether the heads read the weighted mean (local constant)."""
        return self.readout_of(0).is_constant

    @property
    def xp(self):
        """The namespace of the arrays."""
        return namespace_of(self.Z)[0]

    @property
    def n_samples(self):
        """Number of keys."""
        return self.Z.shape[0]

    @property
    def head_dim(self):
        """Columns of ``Z`` per head."""
        return self.Z.shape[1] // self.n_heads

    def head(self, h):
        """Columns of ``Z`` of head ``h``."""
        d = self.head_dim
        return self.Z[:, h * d : (h + 1) * d]

    def passes(self):
        """Passes over these keys, as the kernel runs them (see
        ``BlockPasses`` for the methods)."""
        return self.kernel.passes(self)

    def searchable(self):
        """These keys with the kernel's search index (see
        ``Kernel.searchable``)."""
        return self.kernel.searchable(self)

    def astype(self, dtype):
        """These keys in ``dtype`` (rows, targets, weights and the readouts'
        ranges); no search index."""
        xp = self.xp
        readout = self.readout
        if isinstance(readout, tuple):
            readout = tuple(r.astype(dtype, xp=xp) for r in readout)
        else:
            readout = readout.astype(dtype, xp=xp)
        return Keys(
            xp.astype(self.Z, dtype),
            xp.astype(self.Y, dtype),
            xp.astype(self.log_sw, dtype),
            self.kernel,
            self.n_heads,
            readout=readout,
        )

    def take(self, rows, *, Y=None, log_sw=None, readout=None):
        """The keys of ``rows`` (an integer array of the namespace), with
        other targets ``Y``, log weights ``log_sw`` or ``readout`` for them
        when given; no search index."""
        xp = self.xp
        return Keys(
            xp.take(self.Z, rows, axis=0),
            xp.take(self.Y, rows, axis=0) if Y is None else Y,
            xp.take(self.log_sw, rows, axis=0) if log_sw is None else log_sw,
            self.kernel,
            self.n_heads,
            readout=self.readout if readout is None else readout,
        )
