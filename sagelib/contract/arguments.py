"""Type checks for the scalar arguments of the contract and of the kernels' wrappers.

A string or a bool where a number belongs, or a string where a bool belongs, would otherwise pass
through truthiness (``causal="False"`` is true) or fail later in a comparison with a message that
names neither the argument nor the fix. Each check raises :class:`ArgumentTypeError`: a TypeError,
as torch raises for a wrong type, and a ValueError too, so that one ``except ValueError`` still
catches every bad input to sagelib.
"""

from __future__ import annotations

import math
import numbers


class ArgumentTypeError(TypeError, ValueError):
    """An argument of the wrong type; the message names the argument, what was expected and the fix."""


def _shown(value) -> str:
    return f"{type(value).__name__} {value!r}"


def _is_bool(value) -> bool:
    """A Python bool or numpy's (numpy.bool_, named numpy.bool in numpy 2)."""
    return isinstance(value, bool) or (type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"))


def check_flag(name: str, value) -> bool:
    """``value`` when it is a bool (numpy's bool too); never judged by truthiness."""
    if _is_bool(value):
        return bool(value)
    hint = ""
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no", "0", "1"):
        hint = f"; pass {name}={value.strip().lower() in ('true', 'yes', '1')} (a bool, not text)"
    raise ArgumentTypeError(f"{name}: expected a bool (True or False), got {_shown(value)}{hint or '; pass True or False'}")


def check_number(name: str, value, *, allow_none: bool = False) -> float | None:
    """``value`` as a float when it is a real number (int, float, numpy scalar), not a bool or text."""
    if value is None and allow_none:
        return None
    if isinstance(value, numbers.Real) and not _is_bool(value):
        return float(value)
    none = " or None" if allow_none else ""
    if isinstance(value, str):
        hint = f"; convert the text first, e.g. {name}=float({value!r})"
    elif hasattr(value, "item") and getattr(value, "numel", lambda: 0)() == 1:
        hint = f"; pass a Python number, e.g. {name}={name}.item()"
    else:
        hint = f"; pass a float{none}"
    raise ArgumentTypeError(f"{name}: expected a number{none}, got {_shown(value)}{hint}")


def check_sm_scale(value) -> float | None:
    """None (the default head_dim ** -0.5) or a positive finite number."""
    scale = check_number("sm_scale", value, allow_none=True)
    if scale is not None and not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"sm_scale: expected a positive finite number or None, got {value!r}")
    return scale


def check_integer(name: str, value, *, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    none = " or None" if allow_none else ""
    raise ArgumentTypeError(f"{name}: expected an int{none}, got {_shown(value)}; pass a whole number")


def check_call(*, causal, sm_scale, return_lse=False, check_finite=True) -> None:
    """The scalar arguments every attention entry point takes, checked before any tensor is read."""
    check_flag("causal", causal)
    check_sm_scale(sm_scale)
    check_flag("return_lse", return_lse)
    check_flag("check_finite", check_finite)
