"""The one wording of a bad value, for pydantic errors and request errors alike."""

import pydantic
import pytest
from pydantic import BaseModel, Field

from ads_ranking_pipelines.config.errors import (
    QUOTE_LIMIT,
    clause,
    format_validation_error,
)
from ads_ranking_pipelines.config.messages import request_error, validation_error
from ads_ranking_pipelines.config.validation import RequestError


class Knobs(BaseModel):
    workers: int = Field(2, ge=1, le=64)
    name: str = Field("a", max_length=5)


def _error(**values) -> pydantic.ValidationError:
    with pytest.raises(pydantic.ValidationError) as err:
        Knobs(**values)
    return err.value


@pytest.mark.parametrize("values, expected", [
    ({"workers": 0}, "invalid workers=0: Input should be greater than or equal to 1; valid: [1, 64]"),
    # a wrong type still names the range the field takes
    ({"workers": "many"}, "invalid workers='many': Input should be a valid integer, unable to parse string as an "
                          "integer; valid: [1, 64]"),
    # no range on the field: the bound from pydantic's context
    ({"name": "toolong"}, "invalid name='toolong': String should have at most 5 characters; valid: length <= 5"),
])
def test_a_field_names_its_value_why_and_what_is_valid(values, expected):
    assert format_validation_error(_error(**values), Knobs) == expected


def test_front_ends_word_the_same_error_with_the_option():
    err = _error(workers=0, name="toolong")
    assert validation_error(err) == ("invalid --workers (workers) = 0: Input should be greater than or equal to 1; "
                                     "valid: >= 1; invalid --name (name) = 'toolong': String should have at most 5 "
                                     "characters; valid: length <= 5")
    # the request errors the CLI raises itself read the same way
    assert request_error(RequestError("workers", 0, [1, 2], "too few")) == clause("--workers (workers)", 0, "too few",
                                                                                  "1, 2")


def test_a_long_value_is_cut_and_a_prefix_says_where_the_model_sits():
    text = format_validation_error(_error(name="x" * 500), Knobs, prefix="source.")
    assert text.startswith("invalid source.name='xxx") and "(500 characters)" in text
    assert len(text) < QUOTE_LIMIT + 120
