"""What a public-format CTR file looks like: columns, separator, header, integer columns.

The formats themselves are in their own modules (``criteo_tsv.py``, ``avazu_csv.py``), listed
by ``format_registry.py``: this module imports neither (the import-linter contract
``no-circles`` keeps it so)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pyarrow as pa


class FileFormatError(ValueError):
    def __init__(self, message: str, file: str, line: int | None) -> None:
        super().__init__(message)
        self.file = file
        self.line = line


@dataclass(frozen=True)
class FileFormat:
    kind: str
    description: str                       # for error messages: what a valid line looks like
    delimiter: str
    columns: tuple[str, ...]               # in file order
    label: str
    int_columns: tuple[str, ...]           # integers (negative allowed), empty = missing
    header: bool                           # a header line (the column names) may open each file
    derive: Callable[[pa.Table], pa.Table] | None = None   # columns computed from the file's

    @property
    def separator_name(self) -> str:
        return {"\t": "tab", ",": "comma"}.get(self.delimiter, repr(self.delimiter))

    def header_lines(self, first_line: str, uri: str) -> int:
        """1 if ``first_line`` is this format's header, else 0; a wrong header is an error."""
        if not self.header:
            return 0
        fields = first_line.split(self.delimiter)
        if tuple(fields) == self.columns:
            return 1
        if fields and fields[0] == self.columns[0]:
            raise FileFormatError(
                f"{uri}:1: header {fields} is not the {self.kind} header {list(self.columns)}", uri, 1)
        return 0
