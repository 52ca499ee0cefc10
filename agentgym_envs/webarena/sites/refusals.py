"""Input a site does not accept, and the checks every site makes of form fields and page numbers.

Plain Python (no web framework), so a site's database layer can refuse a change too."""

from __future__ import annotations

import re

_PAGE = re.compile(r"[1-9][0-9]{0,3}")


class Refused(Exception):
    """Input the site does not accept: the HTTP status (400 malformed, 404 unknown, 422 out of bounds
    or not allowed) and why, for the page that says so."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def check_lengths(limits: dict[str, tuple[int, str]], data: dict[str, str], *keys: str) -> None:
    """`Refused` (422) when a field of `data` is longer than its limit in `limits` (key -> the most
    characters, the field's name in the message)."""
    for key in keys:
        limit, label = limits[key]
        if len(data.get(key, "")) > limit:
            raise Refused(422, f"The {label} can be at most {limit} characters long.")


def parse_page(text: str) -> int:
    """A page number from a URL query (empty: the first page), or `Refused`."""
    if not text:
        return 1
    if not _PAGE.fullmatch(text):
        raise Refused(400, "The page must be a whole number from 1 to 9999.")
    return int(text)
