"""The warpfix language server (``warpfix lsp``): pygls over stdio.

- Diagnostics on open and save, and on change: at once when no lint of the document is in
  flight, else after a short pause that coalesces a burst of keystrokes (debounced). Each carries
  the rule ID as its code, a link to the rule doc where the package declares a
  ``Documentation`` URL, the related places, and in ``data`` which finding it is. No fix is
  computed for a diagnostic: a codemod rewrites whole files, far too slow to run per finding
  on every keystroke.
- Code actions: one quick fix per finding that has a fix (a ``WorkspaceEdit`` over every file
  the codemod touches; unsafe fixes are offered with "(unsafe)" in the title and are never
  preferred), "Disable WFnnn for this line" (adds ``# warpfix: ignore[WFnnn]``), and
  ``source.fixAll.warpfix`` with every safe fix of the file. The edits of a fix are computed
  when the client resolves the action (``codeAction/resolve``), or in the ``codeAction``
  request itself for a client that cannot resolve edits; never for an action not asked for.
- Hover over a finding shows its rule's documentation.

The open Python documents of the editor are checked together with the Python files of their
folders joined to them by imports (either way, transitively) and the project modules they
import (both read from disk), so findings and fixes that span files (a kernel and its launch
sites) work; diagnostics are published for the open documents. A neighbour is read from disk
again only when its stat stamp (size, inode, mtime, ctime) changed. The other files of the folders
are not re-analysed on each change: what they record on tapes, which sets the model's
project-wide switches, is computed once per content of those files.
Configuration is the nearest ``[tool.warpfix]``; the client may add ``select``/``ignore``
lists as initialization options. A file that does not parse shows one error diagnostic; an
internal error is logged to the client and never stops the server.
"""

from __future__ import annotations

from warpfix.lsp.server import create_server, main

__all__ = ["create_server", "main"]
