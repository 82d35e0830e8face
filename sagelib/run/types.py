"""A notebook parameter's declared type, checked before any notebook starts.

A parameters cell declares each parameter as papermill reads it, ``name: type = default  # help``:

    n_tokens: int = 2048  # tokens per sequence (at least 1)
    seq_sweep: list[int] = [256, 1024, 4096]  # sequence lengths of the error sweep (at least 1)
    device: str = "cpu"  # where the contract runs (one of cpu, cuda)

The types are ``int``, ``float``, ``bool``, ``str``, ``dict``, ``list`` and ``list[T]`` of the first four.
The help comment may end in a bound on a number (or on each number of a list): ``(at least 1)``, ``(more than
0)``, ``(at most 8)``, ``(less than 1)``, or a choice among words: ``(one of cpu, cuda)``; words, not ``>=``:
papermill skips a parameters line holding a second ``=``. :func:`check` takes a value from a profile or a
``-p`` option as the declared type (an int is a float too, a tuple a list, a number given for a text parameter
its text) or refuses it with a message naming the parameter, its declaration and a value that would do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sagelib.errors import InputError

_SCALARS: dict[str, tuple[type, ...]] = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}
_EXAMPLES = {"int": "2048", "float": "0.5", "bool": "true", "str": "text", "dict": "{a: 1}"}
_LIST = re.compile(r"^list(?:\[(\w+)\])?$")
_BOUND = re.compile(r"\((at least|more than|at most|less than)\s+(-?\d+(?:\.\d+)?(?:e-?\d+)?)\)\s*$")
_CHOICE = re.compile(r"\(one of ([\w.,\s-]+)\)\s*$")
KNOWN = "int, float, bool, str, dict, list, list[int], list[float], list[bool], list[str]"


@dataclass(frozen=True)
class Declared:
    """What a parameters cell says about one parameter: its type, help comment and the line that says it."""

    name: str
    annotation: str | None
    help: str = ""
    line: str = ""

    @property
    def element(self) -> str | None:
        """The element type of a list (``None`` for ``list`` alone), or the scalar type itself."""
        match = _LIST.match(self.annotation or "")
        return match.group(1) if match else self.annotation


def declare(name: str, annotation: str | None, help_text: str, line: str, where: str) -> Declared:
    """A :class:`Declared`, or InputError when the annotation is not one the runner can check."""
    if annotation is not None:
        annotation = annotation.strip().strip("'\"")
        list_match = _LIST.match(annotation)
        ok = annotation in _SCALARS or annotation == "dict" or (
            list_match and (list_match.group(1) is None or list_match.group(1) in _SCALARS))
        if not ok:
            raise InputError(f"{where}: parameter {name} is declared {annotation!r}, a type the runner cannot check; "
                             f"declare one of {KNOWN}")
    return Declared(name, annotation, help_text.strip(), line.strip())


def _is(value: Any, scalar: str) -> bool:
    return isinstance(value, _SCALARS[scalar]) and (scalar == "bool" or not isinstance(value, bool))


def _coerce_scalar(value: Any, scalar: str) -> Any:
    if scalar == "str" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)  # -p name=2024 for a text parameter: the text as given
    return value


def _example(declared: Declared, default: Any) -> str:
    if default is not None:
        return repr(default).replace(" ", "") if not isinstance(default, str) else default
    return _EXAMPLES.get(declared.element or "", "[1,2]")


def check(declared: Declared, value: Any, default: Any, source: str, notebook: str) -> Any:
    """``value`` (from ``source``: a profile or ``-p``) as the declared type; InputError naming what fits."""
    if declared.annotation is None:
        return value
    kind = declared.annotation

    def refuse(problem: str) -> InputError:
        return InputError(f"{source}: {notebook}'s parameter {declared.name} {problem}, got {value!r} "
                          f"(declared `{declared.line}`); give e.g. -p {declared.name}={_example(declared, default)}")

    if kind == "dict":
        if not isinstance(value, dict):
            raise refuse("is a mapping")
        return value
    list_match = _LIST.match(kind)
    if list_match:
        if isinstance(value, tuple):
            value = list(value)
        if not isinstance(value, list):
            raise refuse(f"is a {kind}, written [a, b]")
        element = list_match.group(1)
        if element is None:
            return value
        if not all(_is(v, element) or (element in ("float", "str") and _is(_coerce_scalar(v, element), element))
                   for v in value):
            raise refuse(f"is a {kind}: every element a{'n' if element == 'int' else ''} {element}")
        values = [_coerce_scalar(v, element) for v in value]
        for v in values:
            _check_bound(declared, v, refuse)
        return values
    value = _coerce_scalar(value, kind)
    if not _is(value, kind):
        article = "an" if kind == "int" else "a"
        raise refuse(f"is {article} {kind}")
    _check_bound(declared, value, refuse)
    return value


def _check_bound(declared: Declared, value: Any, refuse) -> None:
    bound, choice = _BOUND.search(declared.help), _CHOICE.search(declared.help)
    if bound and isinstance(value, (int, float)) and not isinstance(value, bool):
        op, limit = bound.group(1), float(bound.group(2))
        holds = {"at least": value >= limit, "more than": value > limit, "at most": value <= limit,
                 "less than": value < limit}[op]
        if not holds:
            raise refuse(f"must be {op} {bound.group(2)}")
    if choice and isinstance(value, str):
        words = [w.strip() for w in choice.group(1).split(",") if w.strip()]
        if value not in words:
            raise refuse(f"is one of {', '.join(words)}")
