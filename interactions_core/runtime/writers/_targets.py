"""Whether a path may be written: existing files, directories, devices, the same file twice.

Every output of the CLI (records, traces, reports, datasets) asks these
questions before anything is written, so a run never destroys a file it was
not told to replace, and ``/dev/null`` or a named pipe is written as it is.
"""

from __future__ import annotations

import os
import stat

from ..errors import DatasetError

__all__ = ["is_special_file", "refuse_existing", "same_file"]


def refuse_existing(
    path: str | os.PathLike[str], overwrite: bool, flag: str = "--overwrite"
) -> None:
    """Raise :class:`DatasetError` when ``path`` exists and ``overwrite`` is false.

    Only regular files (and directories, which can never be written) are refused:
    a device such as ``/dev/null`` or a named pipe is written to as it is.
    """
    if os.path.isdir(path):
        raise DatasetError(f"{os.fspath(path)} is a directory; give a file name to write")
    if not overwrite and os.path.lexists(path) and not is_special_file(path):
        raise DatasetError(
            f"{os.fspath(path)} already exists; refusing to overwrite it "
            f"(choose another file, or pass {flag})"
        )


def is_special_file(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` exists and is neither a regular file nor a directory (``/dev/null``)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether ``a`` and ``b`` name the same file (``os.path.samefile`` when both exist)."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return os.path.realpath(a) == os.path.realpath(b)
