"""Screenshots of each embedded WebArena site's main page, taken with the env's headless Chromium.

Each is a PNG of the top of the page (1000x700 by default) under `docs/images/web_<site>.png`, with its
colours reduced to a palette when that keeps it under `--max-kb` (the README shows them).

    python benchmarks/webarena_screenshots.py [--out docs/images] [--max-kb 120]
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path

from agentgym_envs.webarena.browser.chromium import LAUNCH_ARGS, find_chromium
from agentgym_envs.webarena.sites import EmbeddedSites

#: Site name -> the short name in the file name.
SHORT = {"shopping": "shop", "shopping_admin": "admin", "reddit": "forum", "gitlab": "code", "homepage": "home"}


def shrink(png: bytes, max_kb: int) -> bytes:
    """`png` as is when small enough, else with its colours reduced to a palette (fewer, until it fits)."""
    if len(png) <= max_kb * 1024:
        return png
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    for colours in (256, 128, 64, 32):
        out = io.BytesIO()
        image.quantize(colors=colours).save(out, format="PNG", optimize=True)
        if out.tell() <= max_kb * 1024:
            break
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).parent.parent / "docs" / "images"))
    parser.add_argument("--width", type=int, default=1000)
    parser.add_argument("--height", type=int, default=700)
    parser.add_argument("--max-kb", type=int, default=120)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sites = EmbeddedSites()
    sites.start()
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=find_chromium(), headless=True, args=list(LAUNCH_ARGS))
            context = browser.new_context(
                proxy={"server": sites.proxy}, viewport={"width": args.width, "height": args.height}
            )
            context.add_cookies(sites.cookies())
            page = context.new_page()
            for site in sites.sites:
                page.goto(site.origin + "/")
                png = shrink(page.screenshot(), args.max_kb)
                path = out / f"web_{SHORT.get(site.name, site.name)}.png"
                path.write_bytes(png)
                print(f"{path}: {site.title}, {len(png) // 1024} KB")
            browser.close()
    finally:
        sites.stop()


if __name__ == "__main__":
    main()
