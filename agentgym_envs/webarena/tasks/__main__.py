"""`python -m agentgym_envs.webarena.tasks`: the Markdown table of the bundled tasks (per site, templates
and train/test tasks per kind), or with `--held-out` the held-out templates."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from agentgym_envs.webarena.tasks.catalog import TaskCatalog
from agentgym_envs.webarena.tasks.splits import site_templates, table


def main(argv: Sequence[str] | None = None) -> None:
    """Print the table (`--table`, the default) and/or the held-out templates (`--held-out`)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--table", action="store_true", help="print the Markdown table of the bundled tasks")
    parser.add_argument("--held-out", action="store_true", help="list the held-out templates")
    args = parser.parse_args(argv)
    catalog = TaskCatalog.bundled()
    templates = site_templates()
    if args.table or not args.held_out:
        print(table(list(catalog.by_id.values()), templates))
    if args.held_out:
        for site_list in templates.values():
            for template in site_list:
                if template.held_out:
                    print(f"{template.template_id} ({template.kind}): {template.intent_template}")


if __name__ == "__main__":
    main()
