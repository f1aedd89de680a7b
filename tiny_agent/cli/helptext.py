"""Help text people expect: ``SESSION``, not typer 0.29's ``{SESSION}`` and ``SESSION <str>``.

typer 0.29 decorates every argument with its Python type (``<str>``,
``<bool>``) in the help and wraps required arguments in braces in the usage
line.  Options get a plain ``metavar`` where they are declared; arguments
have no such switch, so their two display methods are replaced here.  The
replacement is guarded: on a typer without these methods nothing changes,
and tests/test_cli_docs.py checks every command's help for the noise.
"""

from __future__ import annotations

from typing import Any

import typer.core


def _usage_name(self: Any) -> str:
    """``NAME`` when required, ``[NAME]`` when not, ``...`` when it takes several."""
    name = str(self.display_name_raw)
    shown = name if self.required else f"[{name}]"
    if self.nargs != 1 and not name.endswith("..."):
        shown += "..."
    return shown


def _no_type(self: Any, ctx: Any) -> None:
    return None


def plain_help() -> None:
    argument = getattr(typer.core, "TyperArgument", None)
    if argument is None:
        return
    if hasattr(argument, "_usage_display_name"):
        argument._usage_display_name = _usage_name
    if hasattr(argument, "display_type_rich"):
        argument.display_type_rich = _no_type
