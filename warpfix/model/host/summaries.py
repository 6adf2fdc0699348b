"""Effect summaries of installed libraries' functions, derived by running them on unknown arguments."""

from __future__ import annotations

import ast
import json

from warpfix.model.facts import Buffer
from warpfix.model.host import library_callbacks
from warpfix.model.host.interpreter import HostInterpreter
from warpfix.model.host.values import Val, _Frame
from warpfix.model.library import LibraryIndex
from warpfix.model.library_summary import Op, Summary
from warpfix.model.source import SourceFile


class _LibraryInterpreter(HostInterpreter):
    """Runs installed libraries' functions to derive their effect summaries: modules load from the
    library index on first use, every function is followed, no method is guessed by name."""

    def __init__(self, index: LibraryIndex) -> None:
        super().__init__({}, [], {})
        self.index = index
        self.follow_all = True
        self.kernels_by_file = _LazyKernels(index)

    def resolve_module(self, src: SourceFile, mod: str, level: int) -> SourceFile | None:
        full = self.index.absolute(src, mod, level)
        hit = self.modules.get(full)
        if hit is None:
            hit = self.index.module(full)
            if hit is None:
                return None
            self.modules[full] = hit
        return hit

    def class_of(self, src: SourceFile, fn: ast.FunctionDef) -> tuple[SourceFile, ast.ClassDef] | None:
        parent = src.parents.get(id(fn))
        return (src, parent) if isinstance(parent, ast.ClassDef) else None


class _LazyKernels(dict):
    """A library file's kernel facts, computed the first time a name of that file is resolved."""

    def __init__(self, index: LibraryIndex) -> None:
        super().__init__()
        self.index = index

    def get(self, path, default=None):  # type: ignore[override]
        hit = super().get(path)
        if hit is None:
            src = self.index.parsed(path)
            if src is None:
                return default
            hit = self[path] = self.index.kernels(src)
        return hit


def library_interpreter(index: LibraryIndex) -> _LibraryInterpreter:
    interp = getattr(index, "_interpreter", None)
    if interp is None:
        interp = _LibraryInterpreter(index)
        index._interpreter = interp  # type: ignore[attr-defined]
    return interp



def _paths_from(roots: dict[str, Val], max_depth: int = 4) -> dict[int, str]:
    """Buffer id -> the shortest path from a parameter that reaches it (breadth first)."""
    out: dict[int, str] = {}
    seen: set[int] = set()
    level: list[tuple[Val, str]] = [(v, name) for name, v in roots.items()]
    for _ in range(max_depth + 1):
        nxt: list[tuple[Val, str]] = []
        for v, path in level:
            if v.id in seen:
                continue
            seen.add(v.id)
            if v.buf is not None:
                out.setdefault(v.buf.id, path)
            for name, child in v.attrs.items():
                if not name.startswith("__"):
                    nxt.append((child, f"{path}.{name}"))
            for key, child in dict(v.items).items():
                if key.isdigit() or key.lstrip("-").isdigit():
                    nxt.append((child, f"{path}[{key}]"))
        level = nxt
    return out



def summarize(index: LibraryIndex, src: SourceFile, fn: ast.FunctionDef, qualname: str,
              is_method: bool) -> Summary | None:
    """Run a library function on unknown arguments and name what it reads and writes by paths."""
    interp = library_interpreter(index)
    interp.reset()
    interp.modules.setdefault(src.module_name, src)
    frame = _Frame(src, {}, fn=fn)
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    roots: dict[str, Val] = {}
    for i, name in enumerate(params):
        v = interp.new(name)
        if i == 0 and is_method:
            v.kind = "object"
            v.cls = interp.class_of(src, fn)
            frame.self_val = v
        roots[name] = frame.locals[name] = v
    positional = [*fn.args.posonlyargs, *fn.args.args]
    interp.given = {roots[a.arg].id for a in positional[: len(positional) - len(fn.args.defaults)]}
    for a in fn.args.kwonlyargs:
        roots[a.arg] = frame.locals[a.arg] = interp.new(a.arg)
    if fn.args.vararg:
        frame.locals[fn.args.vararg.arg] = interp.new(fn.args.vararg.arg, "list")
    if fn.args.kwarg:
        frame.locals[fn.args.kwarg.arg] = interp.new(fn.args.kwarg.arg)
    try:
        interp.run_body(fn, frame)
    except Exception:  # noqa: BLE001 - library code the interpreter cannot follow has no summary
        return None
    paths = _paths_from(roots)
    receiver = params[0] if is_method and params else None
    fresh: dict[int, str] = {}

    def path_of(buf: Buffer) -> str | None:
        p = paths.get(buf.id)
        if p is not None:
            return p
        if buf.fresh:
            return fresh.setdefault(buf.id, f"new:{len(fresh)}")
        return None

    ops: list[Op] = library_callbacks.callback_ops(src, fn, [p for p in params if p != receiver])
    seen: set[str] = set()
    for ev in interp.events:
        op: Op | None = None
        if ev.kind == "launch":
            binding = {}
            for pname, b in ev.binding.items():
                p = path_of(b)
                if p is not None:
                    binding[pname] = p
            op = Op("launch", (ev.kernel.path, ev.kernel.name) if ev.kernel is not None else None,
                    str(ev.detail.get("kernel", "")), binding,
                    [p for b in ev.reads if (p := path_of(b))],
                    [p for b in ev.writes if (p := path_of(b))],
                    [p for b in ev.accums if (p := path_of(b))], conditional=bool(ev.branches))
        elif ev.kind in ("copy", "assign", "clone", "zero", "fill"):
            op = Op(ev.kind, reads=[p for b in ev.reads if (p := path_of(b))],
                    writes=[p for b in ev.writes if (p := path_of(b))])
        if op is None:
            continue
        key = json.dumps(op.to_json(), sort_keys=True)
        if key not in seen:  # loops unrolled twice repeat the same op
            seen.add(key)
            ops.append(op)
    binds: dict[str, str] = {}
    if receiver is not None:
        others = {v.id: name for name, v in roots.items() if name != receiver}
        for attr, v in roots[receiver].attrs.items():
            if v.id in others:
                binds[attr] = others[v.id]
    return Summary(qualname, [*params, *(a.arg for a in fn.args.kwonlyargs)], ops, binds)
