"""Writing output files: records and traces line by line, datasets atomically.

Three concerns, one private module each:

* ``_targets`` — whether a path may be written (an existing file is refused
  unless asked, ``/dev/null`` is written as it is, the same file twice);
* ``_lines`` — :class:`LineWriter`, JSON lines written whole (records, traces);
* ``_dataset`` — :func:`write_rows`, a dataset written under a temporary name
  and moved into place when complete (``interactions data``).
"""

from __future__ import annotations

from ._dataset import write_rows
from ._lines import LineWriter
from ._targets import is_special_file, refuse_existing, same_file

__all__ = ["LineWriter", "is_special_file", "refuse_existing", "same_file", "write_rows"]
