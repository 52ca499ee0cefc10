"""What the sites share in reading requests and answering them: their templates, `Refused` for input a
site does not accept, the checks of form fields and page numbers, posted forms, redirects and a list's
page links."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlencode

import jinja2
from starlette.requests import Request
from starlette.responses import RedirectResponse

_PAGE = re.compile(r"[1-9][0-9]{0,3}")


def site_templates(package: str, site_name: str) -> jinja2.Environment:
    """The Jinja2 templates of the site package `package` (its `templates` folder), HTML-escaped, with
    `site_name` on every page."""
    templates = jinja2.Environment(
        loader=jinja2.PackageLoader(package, "templates"), autoescape=True, trim_blocks=True, lstrip_blocks=True
    )
    templates.globals["site_name"] = site_name
    return templates


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


def page_links(path: str, params: dict[str, str], page: int, total: int, page_size: int) -> list[tuple[str, str, bool]]:
    """(label, url, is_current) of the pages of a list of `total` rows, `page_size` a page, with the
    previous and next page (none for one page). The URLs keep `params`, leaving out empty ones."""
    last = max(1, -(-total // page_size))
    if last == 1:
        return []

    def link(number: int) -> str:
        return f"{path}?{urlencode({k: v for k, v in {**params, 'page': str(number)}.items() if v})}"

    links = [("Previous page", link(page - 1), False)] if page > 1 else []
    links += [(f"Page {number}", link(number), number == page) for number in range(1, last + 1)]
    if page < last:
        links.append(("Next page", link(page + 1), False))
    return links


async def read_form(request: Request) -> dict[str, str]:
    """The fields of a posted form, stripped; a field given twice keeps its last value."""
    body = (await request.body()).decode("utf-8", "replace")
    return {key: values[-1].strip() for key, values in parse_qs(body, keep_blank_values=True).items()}


def back_to(url: str) -> RedirectResponse:
    """The answer to a form POST that worked: see `url` (303)."""
    return RedirectResponse(url, status_code=303)
