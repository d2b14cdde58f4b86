from __future__ import annotations

import math
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ads_ranking_pipelines.config.quantity import (
    QuantityError,
    cpu_millis,
    format_cpu,
    format_memory,
    parse_memory,
)


@pytest.mark.parametrize("text,expected", [
    ("1024", 1024),
    ("1Ki", 1024),
    ("512Mi", 512 * 2**20),
    ("16Gi", 16 * 2**30),
    ("1Ti", 2**40),
    ("1.5Gi", 3 * 2**29),
    ("1k", 1000),
    ("2M", 2_000_000),
    ("3G", 3 * 10**9),
    ("1T", 10**12),
    ("0.5", 1),  # fractions of a byte round up
])
def test_parse_memory(text: str, expected: int) -> None:
    assert parse_memory(text) == expected


@pytest.mark.parametrize("text", ["", "Gi", "16GB", "16gi", "-1Gi", "1e3", "1 Gi", "1.Gi", "16Pi"])
def test_parse_memory_rejects(text: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_memory(text)
    assert repr(text) in str(info.value)


def test_parse_memory_rejects_non_strings() -> None:
    with pytest.raises(QuantityError):
        parse_memory(16)  # type: ignore[arg-type]


@pytest.mark.parametrize("num_bytes,expected", [
    (2**40, "1Ti"), (3 * 2**30, "3Gi"), (1536 * 2**20, "1536Mi"), (2048, "2Ki"), (1000, "1000"),
    (0, "0"),
])
def test_format_memory(num_bytes: int, expected: str) -> None:
    assert format_memory(num_bytes) == expected


@given(st.integers(min_value=0, max_value=2**50))
def test_memory_round_trip(num_bytes: int) -> None:
    assert parse_memory(format_memory(num_bytes)) == num_bytes


@pytest.mark.parametrize("cpus,expected", [(1, "1"), (1.0, "1"), (0.5, "500m"), (14.5, "14500m"),
                                           (0.001, "1m"), (176, "176")])
def test_format_cpu(cpus: float, expected: str) -> None:
    assert format_cpu(cpus) == expected


@pytest.mark.parametrize("cpus", [0, -1, 0.0005, 1.2345, float("nan"), float("inf")])
def test_cpu_rejects(cpus: float) -> None:
    with pytest.raises(QuantityError):
        cpu_millis(cpus)


@pytest.mark.parametrize("text", ["1", "1024", "512Mi", "16Gi", "1.5G", "2Ti", "3k", "0.5Ki", "7M",
                                  "250T", "1.25Gi", "100000"])
def test_memory_agrees_with_the_kubernetes_clients_parser(text: str) -> None:
    """Our parser (kept: ``kubernetes`` costs >1 s to import in every Ray worker that reads a
    config) gives the bytes the Kubernetes client's own ``parse_quantity`` gives, rounded up."""
    from kubernetes.utils.quantity import parse_quantity

    assert parse_memory(text) == math.ceil(parse_quantity(text))


@pytest.mark.parametrize("cpus", [0.5, 1, 1.5, 4, 0.001, 31.999])
def test_cpu_quantities_read_back_by_the_kubernetes_client(cpus: float) -> None:
    from kubernetes.utils.quantity import parse_quantity

    assert parse_quantity(format_cpu(cpus)) == Decimal(str(cpus))
