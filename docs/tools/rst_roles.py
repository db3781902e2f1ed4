"""A MkDocs hook: show Sphinx roles in docstrings (``:class:`~pkg.mod.Name```) as code.

The docstrings use Sphinx's cross-reference roles, which IDEs and ``help()`` show
as they are. mkdocstrings renders the backquoted part as code but leaves the role
name in front of it (``:class:Name``); this drops the role and, as Sphinx does for
a leading ``~``, keeps only the last dotted component. Nothing else is changed.
"""

from __future__ import annotations

import re
from typing import Any

ROLE = re.compile(r":(?:class|meth|func|attr|mod|data|exc|obj):<code>(~?)([^<]*)</code>")


def _code(match: re.Match[str]) -> str:
    short, target = match.group(1), match.group(2)
    return f"<code>{target.rsplit('.', 1)[-1] if short else target}</code>"


def on_page_content(html: str, **kwargs: Any) -> str:
    return ROLE.sub(_code, html)
