"""What the sites' apps share in reading requests and answering them: their templates, posted forms,
redirects and the page links of a list."""

from __future__ import annotations

from urllib.parse import parse_qs, urlencode

import jinja2
from starlette.requests import Request
from starlette.responses import RedirectResponse


def site_templates(package: str, site_name: str) -> jinja2.Environment:
    """The Jinja2 templates of the site package `package` (its `templates` folder, then the sites'
    shared `templates/site_base.html`, the page that every site's `base.html` extends), HTML-escaped,
    with `site_name` on every page."""
    loader = jinja2.ChoiceLoader(
        [jinja2.PackageLoader(package, "templates"), jinja2.PackageLoader(__package__, "templates")]
    )
    templates = jinja2.Environment(loader=loader, autoescape=True, trim_blocks=True, lstrip_blocks=True)
    templates.globals["site_name"] = site_name
    return templates


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
