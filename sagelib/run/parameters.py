"""A run's parameters: the profile that fits this machine, the profiles file, the overrides given as papermill
takes them (``-p NAME VALUE`` or ``-p NAME=VALUE``, ``-r NAME TEXT``, ``-y YAML``, ``-f FILE``), and what each
notebook receives, checked against the types its parameters cell declares (:mod:`sagelib.run.types`).
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import yaml

from sagelib.errors import InputError
from sagelib.run.execute import DEFAULT_CELL_TIMEOUT_S
from sagelib.run.notebooks import IDENTIFIER, OUTPUT_DIR_PARAMETER, Notebook
from sagelib.run.types import check

PROFILES_FILE = "profiles.yaml"


#: Profile-level settings that sit beside the notebook entries of a profile.
PROFILE_SETTINGS = ("cell_timeout_s",)


def default_profile() -> str:
    """The profile that fits this machine: ``gpu`` where torch sees CUDA, else ``cpu``."""
    import torch

    return "gpu" if torch.cuda.is_available() else "cpu"


_WORDS = {"true": True, "false": False, "null": None, "none": None, "~": None}


def parse_value(text: str) -> Any:
    """A ``-p`` value: a Python literal (``3``, ``1e-3``, ``[64, 256]``, ``'x'``, ``None``,
    ``True``), a YAML word (``true``, ``false``, ``null``) or flow list/mapping
    (``[cpu, cuda]``), else the text itself as a string (``cuda``).

    A value that opens a list or mapping but does not parse is a ValueError.
    """
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    stripped = text.strip()
    if stripped.lower() in _WORDS:
        return _WORDS[stripped.lower()]
    if stripped[:1] in ("[", "{"):
        try:
            value = yaml.safe_load(stripped)
        except yaml.YAMLError:
            value = None
        if not isinstance(value, (list, dict)):
            raise InputError(f"value {text!r} opens a list or mapping but does not parse; write e.g. [64, 256]")
        return value
    return text


def parse_override(text: str) -> tuple[str, Any]:
    """``"NAME=VALUE"`` -> ``(NAME, parsed VALUE)``; ValueError naming the fix otherwise."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not IDENTIFIER.match(name):
        raise InputError(f"-p {text!r}: expected NAME=VALUE with NAME a Python identifier, e.g. -p n_tokens=1024")
    if name == OUTPUT_DIR_PARAMETER:
        raise InputError(f"-p {text!r}: output_dir is set by the runner; use --out DIR to choose the run folder")
    try:
        return name, parse_value(value)
    except ValueError as exc:
        raise InputError(f"-p {text!r}: {exc}") from None


def _checked_name(name: str, given: str) -> str:
    if not IDENTIFIER.match(name):
        raise InputError(f"{given}: {name!r} is not a parameter name (a Python identifier), e.g. -p n_tokens 1024")
    if name == OUTPUT_DIR_PARAMETER:
        raise InputError(f"{given}: output_dir is set by the runner; use --out DIR to choose the run folder")
    return name


def parse_param(item: str | Sequence[str]) -> tuple[str, Any]:
    """One ``-p``: ``"NAME=VALUE"`` or ``[NAME=VALUE]`` (sagelib's form) or ``[NAME, VALUE]`` (papermill's)."""
    if isinstance(item, str):
        return parse_override(item)
    if len(item) == 1:
        return parse_override(item[0])
    if len(item) != 2:
        raise InputError(f"-p {' '.join(item)}: expected -p NAME VALUE or -p NAME=VALUE, one parameter per -p")
    name = _checked_name(item[0], f"-p {item[0]} {item[1]}")
    try:
        return name, parse_value(item[1])
    except ValueError as exc:
        raise InputError(f"-p {item[0]} {item[1]!r}: {exc}") from None


def parse_overrides(texts: Sequence[str | Sequence[str]] | None) -> dict[str, Any]:
    """All ``-p`` values, later ones winning."""
    return dict(parse_param(t) for t in texts or ())


def _mapping(text: str, given: str) -> dict[str, Any]:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{given}: not valid YAML ({str(exc).splitlines()[0]}); write e.g. "
                         "'{n_tokens: 1024, seq_sweep: [256, 1024]}'") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise InputError(f"{given}: expected a mapping of parameter names to values, got {type(document).__name__}; "
                         "write e.g. '{n_tokens: 1024}'")
    return {_checked_name(str(k), given): v for k, v in document.items()}


def collect_overrides(params: Sequence[str | Sequence[str]] | None = None, *, raw: Sequence[Sequence[str]] = (),
                      yaml_texts: Sequence[str] = (), files: Sequence[str | os.PathLike] = ()) -> dict[str, Any]:
    """The overrides of papermill's options in papermill's order, later winning: ``-f FILE`` (YAML files), ``-y YAML``
    (YAML text), ``-p`` (values parsed), ``-r NAME TEXT`` (kept as text)."""
    values: dict[str, Any] = {}
    for name in files:
        path = Path(name)
        if not path.is_file():
            raise InputError(f"-f {str(name)!r}: no such file; give a YAML file of parameter names to values")
        values.update(_mapping(path.read_text(encoding="utf-8"), f"-f {name}"))
    for text in yaml_texts:
        values.update(_mapping(text, f"-y {text!r}"))
    values.update(parse_overrides(params))
    for name, text in raw:
        values[_checked_name(name, f"-r {name} {text!r}")] = text
    return values


@dataclass(frozen=True)
class Profile:
    """One profile of ``profiles.yaml``: per-notebook values and the per-cell timeout."""

    name: str
    notebooks: dict[str, dict[str, Any]]
    cell_timeout_s: float = DEFAULT_CELL_TIMEOUT_S


def load_profiles(path: str | os.PathLike) -> dict[str, Profile]:
    """Parse ``profiles.yaml``: ``{profile: {cell_timeout_s?: s, NN_name: {param: value}}}``."""
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid YAML ({exc}); fix the file") from None
    if not isinstance(document, dict):
        raise InputError(f"{path}: expected a mapping of profile name -> notebooks, got {type(document).__name__}")
    profiles = {}
    for name, entries in document.items():
        entries = entries or {}
        if not isinstance(entries, dict):
            raise InputError(f"{path}: profile {name!r} must map notebook names to parameter mappings")
        notebooks = {}
        timeout = DEFAULT_CELL_TIMEOUT_S
        for key, values in entries.items():
            if key == "cell_timeout_s":
                if isinstance(values, bool) or not isinstance(values, (int, float)) or values <= 0:
                    raise InputError(f"{path}: {name}.cell_timeout_s must be a positive number of seconds, "
                                     f"got {values!r}")
                timeout = values
            elif isinstance(values, dict) or values is None:
                notebooks[str(key)] = dict(values or {})
            else:
                raise InputError(f"{path}: {name}.{key} must map parameter names to values, got {values!r}")
        profiles[str(name)] = Profile(str(name), notebooks, timeout)
    return profiles


def get_profile(profiles: dict[str, Profile], name: str, path: str | os.PathLike) -> Profile:
    """The profile called ``name``; ValueError listing the known ones otherwise."""
    if name not in profiles:
        known = ", ".join(profiles) or f"none (no {path})"
        raise InputError(f"--profile {name!r}: no such profile in {path}; known profiles: {known}")
    return profiles[name]


def notebook_parameters(notebook: Notebook, profile: Profile, overrides: dict[str, Any],
                        output_dir: Path) -> dict[str, Any]:
    """What papermill injects into ``notebook``: profile values, then overrides, then ``output_dir``."""
    values = profile.notebooks.get(notebook.name, {})
    unknown = sorted(set(values) - set(notebook.parameters))
    if unknown:
        raise InputError(
            f"profile {profile.name!r} sets {', '.join(unknown)} for {notebook.name}, whose parameters cell has "
            f"{', '.join(sorted(notebook.parameters))}; fix the names in {PROFILES_FILE} or add the parameters"
        )
    where = f"profile {profile.name!r} ({PROFILES_FILE})"
    chosen = {k: _checked(notebook, k, v, where) for k, v in values.items()}
    chosen.update({k: _checked(notebook, k, v, "-p") for k, v in overrides.items() if k in notebook.parameters})
    chosen[OUTPUT_DIR_PARAMETER] = str(output_dir)
    return chosen


def _checked(notebook: Notebook, name: str, value: Any, source: str) -> Any:
    declared = notebook.declared.get(name)
    return check(declared, value, notebook.parameters.get(name), source, notebook.name) if declared else value


def check_overrides(overrides: dict[str, Any], notebooks: Sequence[Notebook]) -> None:
    """Every ``-p`` name must be a parameter of at least one selected notebook."""
    known = set().union(*(nb.parameters for nb in notebooks)) if notebooks else set()
    for name in overrides:
        if name not in known:
            raise InputError(
                f"-p {name}=...: no selected notebook has a parameter {name!r}; "
                f"known parameters: {', '.join(sorted(known - {OUTPUT_DIR_PARAMETER})) or 'none'}"
            )
