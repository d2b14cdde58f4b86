"""Warning filters for the processes that run training code, set by the code that starts
training (never at import). Apart from ``worker`` so that a job driver needs no TorchRec for them."""

from __future__ import annotations

import warnings


def quiet_warnings() -> None:
    """TorchRec/DDP emit deprecation warnings per module on every rank; keep worker logs readable."""
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", message=".*autograd kernel was not registered.*")
    warnings.filterwarnings("ignore", message=".*torch.distributed is disabled.*")
    warnings.filterwarnings("ignore", message=".*is_fx_tracing.*")
    warnings.filterwarnings("ignore", message=".*NumPy array is not writable.*")
