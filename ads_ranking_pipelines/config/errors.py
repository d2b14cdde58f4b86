"""Human-sized messages from pydantic validation errors, one wording for every front end:
``invalid <field>=<value>: <why>; valid: <bounds>`` (the CLI and X-Ray name the option too)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

# The most characters of a bad value an error message quotes (then "…" and its length): a
# message names the value without echoing a 10k-character one back.
QUOTE_LIMIT = 80
# pydantic's error context -> how a bound reads
_BOUNDS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<", "max_length": "length <=", "min_length": "length >="}


def quoted(value: Any, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)``, cut to ``limit`` characters (and "… (N characters)") when longer."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = f" ({len(value)} characters)" if isinstance(value, str) else ""
    return f"{text[:limit]}…{size}"


def field_range(model: type[BaseModel] | None, field: str) -> str | None:
    """``[lo, hi]`` (open ends as parentheses) of a constrained numeric field, else None."""
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
    return f"{'(' if lo_open else '['}{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}{')' if hi_open else ']'}"


def clause(name: str, value: Any, why: str | None = None, valid: str | None = None) -> str:
    """The one wording of a bad value: ``invalid <name>=<value>[: <why>][; valid: <valid>]`` (spaces
    round ``=`` when the name is several words, as ``--workers (workers) = 'many'``)."""
    eq = " = " if " " in name else "="
    return f"invalid {name}{eq}{quoted(value)}" + (f": {why}" if why else "") + (f"; valid: {valid}" if valid else "")


def _valid(err: dict[str, Any], model: type[BaseModel] | None, field: str) -> str | None:
    limits = err.get("ctx") or {}
    bounds = ", ".join(f"{_BOUNDS[k]} {v}" for k, v in limits.items() if k in _BOUNDS)
    return field_range(model, field) or bounds or None


def format_validation_error(exc: ValidationError, model: type[BaseModel] | None = None, prefix: str = "",
                            name: Callable[[str], str] = str) -> str:
    """One :func:`clause` per problem, ``; ``-joined.
    ``model`` gives the range of a constrained field (also for a wrong type); ``prefix`` is where
    the model sits in a larger config (``source.``); ``name`` words a field for the front end
    (the CLI: ``--workers (workers)``)."""
    clauses = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()))
        value: Any = err.get("input")
        why = str(err.get("msg", "invalid")).removeprefix("Value error, ").replace(repr(value), quoted(value))
        if not loc:
            clauses.append(f"invalid {prefix.rstrip('.') or 'config'}: {why}")
            continue
        valid = _valid(err, model, loc.split(".")[0])
        clauses.append(clause(name(prefix + loc), value, why, valid))
    return "; ".join(clauses)
