"""Cheap fake case functions for tests/test_distribute.py, importable by the Dask worker processes (which put
this folder on their path) without the heavy imports of the test module itself."""

import os
import time


def slow_square(case):
    """Marks its start as the file ``<case>-<pid>`` in the case's folder, sleeps, returns (case, square, pid)."""
    i, folder, delay = case
    with open(os.path.join(folder, f"{i}-{os.getpid()}"), "w"):
        pass
    time.sleep(delay)
    return i, i * i, os.getpid()


def fails_on_three(case):
    if case == 3:
        raise ValueError("bad case")
    return case


def seen_device(case):
    """The CUDA_VISIBLE_DEVICES the worker running ``case`` sees."""
    time.sleep(0.1)
    return os.environ.get("CUDA_VISIBLE_DEVICES")
