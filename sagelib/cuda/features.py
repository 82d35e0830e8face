"""Which of the card's features the workbook may use: the Hopper paths, and the setting that switches them off.

The Hopper paths are everything that needs sm_90a: the ``cuda-sm90`` backends (wgmma, TMA, setmaxnreg), the wgmma
microbenchmarks, the softmax-beside-wgmma study and the sm_90a sanitizer cases. A card from sm_89 up without them
(an RTX 4090, an RTX 5090, a GB10) runs the rest: the portable mma.sync kernel, its parity and bench, the
microbenchmarks of the units it has. To see on an H200 what such a card gets, switch the Hopper paths off:

    SAGELIB_HOPPER=off sagelib run --profile gpu      # or: sagelib run --no-hopper, sagelib gpu-run --no-hopper

Values: ``off`` (also ``0``, ``no``, ``false``) switches them off; ``on`` or ``auto`` (also ``1``, ``yes``,
``true``, empty or unset) uses them where the card has them. Every Hopper path asks :func:`hopper_unavailable_reason`,
so with the setting off each says why it did not run, naming the setting.
"""

from __future__ import annotations

import os

from sagelib.errors import UsageError

#: The environment variable; children (papermill kernels, ``sagelib gpu-run``'s run) inherit it.
HOPPER_SETTING = "SAGELIB_HOPPER"
_OFF = ("off", "0", "no", "false")
_ON = ("on", "auto", "1", "yes", "true", "")


def hopper_switched_off(environ=None) -> bool:
    """True when the setting switches the Hopper paths off; a UsageError naming the values for anything else."""
    value = (os.environ if environ is None else environ).get(HOPPER_SETTING, "").strip().lower()
    if value in _OFF:
        return True
    if value in _ON:
        return False
    raise UsageError(f"{HOPPER_SETTING}: expected one of {', '.join(repr(v) for v in _OFF + _ON[:-1])} "
                     f"(or unset), got {value!r}; set it to 'off' to run without the Hopper paths, or unset it")


def switched_off_reason(environ=None) -> str | None:
    """Why the Hopper paths do not run when the setting is off; None when it leaves them on."""
    if not hopper_switched_off(environ):
        return None
    return (f"Hopper paths switched off ({HOPPER_SETTING}=off): this run shows what a card without wgmma and "
            f"TMA (sm_89, sm_120, sm_121) gets; unset {HOPPER_SETTING} to use them")


def switch_off(environ=None) -> None:
    """Set the setting to off in ``environ`` (default: this process's, which its children inherit)."""
    (os.environ if environ is None else environ)[HOPPER_SETTING] = "off"


def hopper_unavailable_reason(capability: tuple[int, int] | None = None) -> str | None:
    """None when the Hopper paths may run on this GPU (sm_90, setting not off); otherwise why not.

    ``capability`` is the GPU's (major, minor); None asks torch for the current device's."""
    reason = switched_off_reason()
    if reason is not None:
        return reason
    if capability is None:
        import torch

        if not torch.cuda.is_available():
            return "needs an sm_90 GPU (H100/H200); torch sees no CUDA GPU on this machine"
        capability = torch.cuda.get_device_capability()
    major, minor = capability
    if (major, minor) != (9, 0):
        return (f"needs an sm_90 GPU (wgmma, TMA, setmaxnreg); this one is sm_{major}{minor}: "
                "use the 'cuda' backend (the portable mma.sync kernel)")
    return None
