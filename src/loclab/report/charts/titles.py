"""How a chart names a device and a size, in its titles and its key: the device's model where
the machine is recorded, and of a size only the dimensions that tell charts apart."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from loclab.cases.base import dims_text


def _dims_label(size: dict[str, int], names: Iterable[str]) -> str:
    """'rows=4,194,304, cols=64': the named dimensions of a size, thousands grouped."""
    return ", ".join(f"{name}={size[name]:,}" for name in names)


def size_text(size: dict[str, int], names: Sequence[str]) -> str:
    """The dimensions ``names`` of a size, as a table writes a matrix or product size
    ('4194304x64') where they are all of them, else named ('bins=12,288')."""
    if list(names) == list(size):
        text = dims_text(size)
        if "=" not in text:
            return text
    return _dims_label(size, names)


def varying(sizes: Sequence[dict[str, int]]) -> list[str]:
    """The dimensions that differ between ``sizes`` (those that tell panels apart)."""
    names = list(dict.fromkeys(name for size in sizes for name in size))
    return [name for name in names if len({size.get(name) for size in sizes}) > 1]


def device_title(document: dict[str, Any], device: str) -> str:
    """'GPU: NVIDIA H200', or just 'CPU' where the machine is not recorded."""
    found = (document.get("machine") or {}).get(device) or {}
    name = found.get("name") or found.get("model")
    return f"{device.upper()}: {name}" if name else device.upper()


def column_title(document: dict[str, Any], device: str, sizes: list[dict[str, int]]) -> str:
    """The device, and below it the dimensions its panels share ('keys=4,194,304, ...'):
    each panel's own title then names only what differs."""
    differing = varying(sizes)
    common = [name for name in sizes[0] if name not in differing]
    title = device_title(document, device)
    return f"{title}\n{_dims_label(sizes[0], common)}" if common else title
