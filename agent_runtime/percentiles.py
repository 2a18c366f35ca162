"""The one percentile every latency report uses, so all benchmarks compute "p95" the same way (numpy's linear
interpolation) and say None, never 0 or NaN, when there was nothing to measure."""

from collections.abc import Sequence

import numpy as np


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (q in 0..100) of values, or None when there are none."""
    return None if len(values) == 0 else float(np.percentile(np.asarray(values, float), q))
