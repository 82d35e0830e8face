"""Where the repository's folders are, named once for every module that reads or writes them."""

from pathlib import Path

#: the checkout's root: sagelib/ sits in it (an editable install; a wheel has no data/ or kernels/)
REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = REPO_ROOT / "data"
RESULTS_DIR = DATA_DIR / "results"
KERNELS_DIR = REPO_ROOT / "kernels"
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
