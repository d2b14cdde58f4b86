"""Human-sized messages from pydantic validation errors: field, bad value, what is valid."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError


def _valid_range(model: type[BaseModel] | None, field: str) -> str | None:
    if model is None or field not in model.model_fields:
        return None
    lo = hi = None
    lo_open = hi_open = False
    for m in model.model_fields[field].metadata:
        if getattr(m, "ge", None) is not None:
            lo = m.ge
        if getattr(m, "gt", None) is not None:
            lo, lo_open = m.gt, True
        if getattr(m, "le", None) is not None:
            hi = m.le
        if getattr(m, "lt", None) is not None:
            hi, hi_open = m.lt, True
    if lo is None and hi is None:
        return None
    left = "(" if lo_open else "["
    right = ")" if hi_open else "]"
    return f"{left}{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}{right}"


def format_validation_error(exc: ValidationError, model: type[BaseModel] | None = None,
                            prefix: str = "") -> str:
    """One line per problem: ``invalid <field>=<value>: <why> (valid: <range>)``."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()))
        field = loc.split(".")[0] if loc else ""
        value: Any = err.get("input")
        why = err.get("msg", "invalid")
        if why.startswith("Value error, "):
            why = why[len("Value error, "):]
        where = f"{prefix}{loc}" if loc else (prefix.rstrip(".") or "config")
        line = f"invalid {where}={value!r}: {why}" if loc else f"invalid {where}: {why}"
        rng = _valid_range(model, field)
        if rng:
            line += f" (valid: {rng})"
        lines.append(line)
    return "; ".join(lines)
