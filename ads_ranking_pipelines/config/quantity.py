"""Kubernetes resource quantities: the small subset the cluster template uses.

Memory is written with a binary (``Ki``/``Mi``/``Gi``/``Ti``) or decimal (``k``/``M``/``G``/``T``)
suffix, or as plain bytes. CPUs are a float on our side and a quantity (``"4"``, ``"500m"``)
on the Kubernetes side; Kubernetes keeps millicore precision, so finer values are refused
rather than silently rounded.

Not ``kubernetes.utils.parse_quantity``: importing ``kubernetes`` takes over a second, and the
config is read in every Ray worker. The tests check that both parsers agree on what we accept.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

MEMORY_SUFFIXES: dict[str, int] = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}

_MEMORY = re.compile(r"^(?P<number>[0-9]+(\.[0-9]+)?)(?P<suffix>Ki|Mi|Gi|Ti|k|M|G|T)?$")

# Kubernetes stores CPU with millicore precision.
CPU_RESOLUTION = Decimal("0.001")


class QuantityError(ValueError):
    """A string that is not a quantity this project accepts."""

    def __init__(self, value: object, reason: str) -> None:
        self.value = value
        self.reason = reason
        super().__init__(f"{value!r} is not a valid quantity: {reason}")


def parse_memory(quantity: str) -> int:
    """Bytes in a memory quantity such as ``"512Mi"``, ``"16Gi"``, ``"1.5G"`` or ``"1024"``.

    Fractions of a byte are rounded up, as the API server does.
    """
    if not isinstance(quantity, str):
        raise QuantityError(quantity, "expected a string such as '16Gi'")
    match = _MEMORY.match(quantity)
    if match is None:
        raise QuantityError(
            quantity, "expected a number with an optional suffix Ki, Mi, Gi, Ti, k, M, G or T"
        )
    number = Decimal(match["number"])
    scaled = number * MEMORY_SUFFIXES[match["suffix"] or ""]
    return int(scaled.to_integral_value(rounding="ROUND_CEILING"))


def format_memory(num_bytes: int) -> str:
    """The shortest exact binary-suffixed quantity for ``num_bytes`` (``"512Mi"``, ``"3Gi"``).

    Falls back to plain bytes when no binary suffix divides the value exactly.
    """
    if num_bytes < 0:
        raise QuantityError(num_bytes, "memory cannot be negative")
    for suffix in ("Ti", "Gi", "Mi", "Ki"):
        unit = MEMORY_SUFFIXES[suffix]
        if num_bytes and num_bytes % unit == 0:
            return f"{num_bytes // unit}{suffix}"
    return str(num_bytes)


def cpu_millis(cpus: float) -> int:
    """Millicores in ``cpus``; refuses values finer than one millicore or not positive."""
    try:
        value = Decimal(str(cpus))
    except (InvalidOperation, ValueError) as exc:  # pragma: no cover - float always converts
        raise QuantityError(cpus, "not a number") from exc
    if not value.is_finite() or value <= 0:
        raise QuantityError(cpus, "CPUs must be a positive number")
    millis = value / CPU_RESOLUTION
    if millis != millis.to_integral_value():
        raise QuantityError(cpus, "Kubernetes CPU quantities have millicore (0.001) precision")
    return int(millis)


def format_cpu(cpus: float) -> str:
    """A CPU quantity: whole cores as ``"4"``, anything else in millicores (``"1500m"``)."""
    millis = cpu_millis(cpus)
    if millis % 1000 == 0:
        return str(millis // 1000)
    return f"{millis}m"
