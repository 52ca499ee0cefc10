"""Lenient item names: case, the `minecraft:` prefix, underscores and singular/plural, never a wrong item.

A name is first looked up exactly (after case, prefix, underscores and spacing are normalised), as an
item name (`oak_planks`) or as its in-game display name (`Block of Iron`). Only when that finds
nothing are singular and plural forms of the last word tried, and only a form that names exactly
one item is accepted: `sticks` is `stick`, but `bricks` stays the `bricks` block (an exact name),
never the `brick` item.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

_PREFIX = "minecraft:"


class ItemNameError(ValueError):
    """A name that matches no item, or more than one."""


def display_name(item: str) -> str:
    """How observations and commands write an item: `oak_planks` -> `oak planks`."""
    return item.replace("_", " ")


def normalise(text: str) -> str:
    """Lower case, no `minecraft:` prefix, spaces for underscores, single spaces."""
    text = text.strip().lower()
    text = text.removeprefix(_PREFIX)
    return " ".join(text.replace("_", " ").split())


def _number_forms(key: str) -> list[str]:
    """Singular and plural forms of the last word (`sticks` -> `stick`; `torch` -> `torches`)."""
    head, _, word = key.rpartition(" ")
    prefix = f"{head} " if head else ""
    forms = [word + "s", word + "es"]
    if word.endswith("ies"):
        forms.append(word[:-3] + "y")
    if word.endswith("es"):
        forms.append(word[:-2])
    if word.endswith("s"):
        forms.append(word[:-1])
    if word.endswith("y"):
        forms.append(word[:-1] + "ies")
    return [prefix + form for form in forms if form]


class ItemNames:
    """Resolves what an agent writes to a minecraft-data item name.

    Args:
        display: Item name -> in-game display name, for every item of the version.
        aliased: The items whose display names are accepted too (default: all). Display names
            of items outside the recipes are left out: a few are generic (pigstep's is "Music Disc").
    """

    def __init__(self, display: Mapping[str, str], aliased: Collection[str] | None = None):
        self.items = frozenset(display)
        self._exact: dict[str, str] = {normalise(item): item for item in display}
        aliases: dict[str, set[str]] = {}
        for item, shown in display.items():
            key = normalise(shown)
            if key not in self._exact and (aliased is None or item in aliased):
                aliases.setdefault(key, set()).add(item)
        # A display name shared by two items names neither of them.
        self._exact.update({key: next(iter(found)) for key, found in aliases.items() if len(found) == 1})

    def resolve(self, text: str) -> str:
        """The item that `text` names.

        Raises:
            ItemNameError: `text` names no item, or (through singular/plural forms) several; the
                message is the reason, to follow "it is" ("not a Minecraft item ...").
        """
        key = normalise(text)
        item = self._exact.get(key)
        if item is not None:
            return item
        found = sorted({self._exact[form] for form in _number_forms(key) if form in self._exact})
        if len(found) == 1:
            return found[0]
        if found:
            raise ItemNameError(f"ambiguous between {' and '.join(display_name(i) for i in found)}")
        suffix = " " + key  # built once: the names are many and `key` may be long
        similar = sorted({display_name(item) for k, item in self._exact.items() if key and k.endswith(suffix)})
        hint = f" (similar items: {', '.join(similar[:6])})" if similar else ""
        raise ItemNameError(f"not a Minecraft item{hint}")
