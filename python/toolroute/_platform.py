"""Which interfaces this host offers: Linux's own, or only the POSIX ones macOS has too.

`LINUX_NATIVE` is false on every other system and in a build made with the `portable` cargo
feature (`_core.PORTABLE`). CI runs the whole suite once with that build, so the paths a Mac
takes (here: a command's exit seen by polling instead of a pidfd, leftover processes found with
`ps` instead of /proc) are tested on Linux too.
"""

from __future__ import annotations

import sys

from toolroute._core import PORTABLE

LINUX_NATIVE: bool = sys.platform.startswith("linux") and not PORTABLE
