"""The part of the effect linker's call resolution that one file decides (the rest, across files,
is :meth:`warpfix.model.host.linker.ProjectLinks.callees`): a mixin of the summariser, which holds
the file's ``owners`` (a method's class), ``stores`` (the names each function assigns), ``nested``
(the functions a function is defined in) and one :data:`~warpfix.model.summary.Key` per
definition."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from warpfix.model.host.syntax import _is_static

if TYPE_CHECKING:
    from warpfix.model.summary import Key, Request


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    a = fn.args
    return frozenset(p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs))


class CallRequests:
    owners: dict[int, ast.ClassDef]
    stores: dict[int | None, set[str]]
    nested: set[int]
    local_defs: dict[int, dict[str, ast.FunctionDef]]
    param_names: dict[int, frozenset[str]]  # id(function) -> its parameters' names (asked per call in it)

    def key(self, node: ast.AST) -> Key:
        raise NotImplementedError

    def _request(self, call: ast.Call, scope: tuple[ast.AST, ...]) -> Request | None:
        """The file's part of ``_Links.callees``: () for no project function, None for a call of a
        parameter (a callback: an effect of its own)."""
        f = call.func
        if isinstance(f, ast.Name):
            name = f.id
            inner = scope[0]
            if name in self._params_of(inner):
                # a classmethod's ``cls(...)`` constructs its class, as ``Cls(...)`` would
                return () if self._cls_param(inner, name) else None
            for fn in scope:
                local = self._local_def(fn, name)  # type: ignore[arg-type]
                if local is not None:
                    return ("keys", (self.key(local),))
            return ("name", name, self._is_local(name, scope))
        if not isinstance(f, ast.Attribute):
            return ()
        recv, name = f.value, f.attr
        if isinstance(recv, ast.Call) and isinstance(recv.func, ast.Name) and recv.func.id == "super":
            cls = self._method_class(scope)
            return ("methods", name) if cls is None else ("super", self.key(cls), name)
        if isinstance(recv, ast.Name):
            cls = self._self_class(scope[0], recv.id)  # type: ignore[arg-type]
            if cls is not None:
                return ("overrides", self.key(cls), name)
            if not self._is_local(recv.id, scope):
                return ("global", recv.id, name, recv.id in self.stores.get(None, ()))
        return ("methods", name)

    def _is_local(self, name: str, scope: tuple[ast.AST, ...]) -> bool:
        """A parameter or a name some enclosing function assigns (it shadows the module's)."""
        return any(name in self._params_of(fn) or name in self.stores.get(id(fn), ()) for fn in scope)

    def _params_of(self, fn: ast.AST) -> frozenset[str]:
        hit = self.param_names.get(id(fn))
        if hit is None:
            hit = self.param_names[id(fn)] = _params(fn)  # type: ignore[arg-type]
        return hit

    def _local_def(self, fn: ast.FunctionDef, name: str) -> ast.FunctionDef | None:
        """The function ``name`` defined in ``fn``'s body (not in a nested class or function)."""
        if id(fn) not in self.nested:
            return None  # no function is defined anywhere in it
        table = self.local_defs.get(id(fn))
        if table is None:
            table = self.local_defs[id(fn)] = {}
            todo = list(fn.body)
            while todo:
                stmt = todo.pop()
                if isinstance(stmt, ast.FunctionDef):
                    table.setdefault(stmt.name, stmt)
                elif not isinstance(stmt, (ast.ClassDef, ast.AsyncFunctionDef)):
                    todo.extend(c for c in ast.iter_child_nodes(stmt) if isinstance(c, ast.stmt))
        return table.get(name)

    def _method_class(self, scope: tuple[ast.AST, ...]) -> ast.ClassDef | None:
        for fn in scope:
            owner = self.owners.get(id(fn))
            if owner is not None:
                return owner
        return None

    def _self_class(self, fn: ast.FunctionDef, name: str) -> ast.ClassDef | None:
        """The class whose instance ``name`` is: the first parameter of the method ``fn`` (a closure
        inside a method does not see it: the interpreter runs nested functions on their own frame)."""
        owner = self.owners.get(id(fn))
        if (owner is not None and not _is_static(fn) and fn.args.args
                and fn.args.args[0].arg == name and not fn.args.posonlyargs):
            return owner
        return None

    def _cls_param(self, fn: ast.AST, name: str) -> bool:
        """``name`` is a classmethod's first parameter (``cls(value)`` constructs the class)."""
        owner = self.owners.get(id(fn))
        return bool(owner is not None and fn.args.args  # type: ignore[attr-defined]
                    and fn.args.args[0].arg == name
                    and any(isinstance(d, ast.Name) and d.id == "classmethod" for d in fn.decorator_list))  # type: ignore[attr-defined]
