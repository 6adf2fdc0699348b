"""Project classes: an instance built by ``Cls(...)`` (its ``__init__``, or the one a ``@dataclass``
generates, with its fields' defaults and ``__post_init__``) and a method found in a class or its
bases, ``super()`` included."""

from __future__ import annotations

import ast

from warpfix.model.host.syntax import _callee_name, _find_method, _text
from warpfix.model.host.values import DICT, Val, _Budget, _CallBudget, _Frame, _Return
from warpfix.model.source import SourceFile


class Classes:
    """Project classes of :class:`~warpfix.model.host.interpreter.HostInterpreter` (a mixin)."""

    def construct(self, cls_val: Val, args: list[Val], kwargs: dict[str, Val], e: ast.Call,
                  src: SourceFile) -> Val:
        assert cls_val.cls is not None
        obj = self.new(cls_val.label + "()", "object", cls=cls_val.cls, fresh=True)
        found = self.init_of(cls_val.cls)
        if isinstance(found, tuple) and isinstance(found[1], ast.ClassDef):
            self.dataclass_init(obj, found, args, kwargs, e, src)  # type: ignore[arg-type]
        elif found is not None:
            self.inline(found[0], found[1], [obj, *args], kwargs, e, caller_src=src, bound_self=True)
        return obj

    def init_of(self, cls: tuple[SourceFile, ast.ClassDef], depth: int = 0
                ) -> tuple[SourceFile, ast.FunctionDef | ast.ClassDef] | None:
        """What ``Cls(...)`` runs: the first ``__init__`` of the class and its bases, or the first of them
        that is a ``@dataclass`` defining none (its generated ``__init__``: the class is returned)."""
        src, node = cls
        fn = _find_method(node, "__init__")
        if fn is not None:
            return src, fn
        options = _dataclass_options(node)
        if options and options.get("init", True):
            return cls
        if depth > 8:
            return None
        for base in self.bases(src, node):
            hit = self.init_of(base, depth + 1)
            if hit is not None:
                return hit
        return None

    def dataclass_init(self, obj: Val, cls: tuple[SourceFile, ast.ClassDef], args: list[Val],
                       kwargs: dict[str, Val], e: ast.Call, src: SourceFile) -> None:
        """The ``__init__`` a ``@dataclass`` generates, as Python runs it: the positional arguments bound
        to the fields in order (those of dataclass bases first; not a ``kw_only`` one), keywords by name,
        the defaults (``= value``, ``field(default=...)``, ``field(default_factory=...)``) for the rest;
        then ``__post_init__`` with the ``InitVar`` fields."""
        fields = self.dataclass_fields(cls)
        positional = iter(args)
        post: list[Val] = []
        for name, (fsrc, default, init, kw_only, initvar) in fields.items():
            value = None
            if init and not kw_only:
                value = next(positional, None)
            if value is None and init:
                value = kwargs.get(name)
            if value is None:
                value = self.field_default(fsrc, default, name, e, src)
            if initvar:
                post.append(value)
            else:
                obj.attrs[name] = value
        found = self.find_method(cls, "__post_init__")
        if found is not None:
            self.inline(found[0], found[1], [obj, *post], {}, e, caller_src=src, bound_self=True)

    def dataclass_fields(self, cls: tuple[SourceFile, ast.ClassDef], depth: int = 0
                         ) -> dict[str, tuple[SourceFile, ast.expr | None, bool, bool, bool]]:
        """A dataclass's fields in ``__init__`` order: name -> (its file, its default expression, in
        ``__init__``, keyword-only, an ``InitVar``)."""
        src, node = cls
        fields: dict[str, tuple[SourceFile, ast.expr | None, bool, bool, bool]] = {}
        if depth <= 8:
            for base in reversed(self.bases(src, node)):
                if _dataclass_options(base[1]):
                    fields.update(self.dataclass_fields(base, depth + 1))
        kw_only = bool(_dataclass_options(node).get("kw_only", False))
        for stmt in node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            kind = _text(stmt.annotation).split("[")[0].rsplit(".", 1)[-1]  # ``InitVar[int]`` -> ``InitVar``
            if kind == "KW_ONLY":
                kw_only = True
                continue
            if kind == "ClassVar":
                continue
            default, init, field_kw = stmt.value, True, kw_only
            if isinstance(stmt.value, ast.Call) and _callee_name(stmt.value.func).rsplit(".", 1)[-1] == "field":
                options = {k.arg: k.value for k in stmt.value.keywords if k.arg}
                init = not (isinstance(options.get("init"), ast.Constant) and options["init"].value is False)
                if isinstance(options.get("kw_only"), ast.Constant):
                    field_kw = bool(options["kw_only"].value)  # type: ignore[union-attr]
                default = stmt.value  # ``field(...)``: its default or factory, read by field_default
            # a field a base defined keeps its place, with this default
            fields[stmt.target.id] = (src, default, init, field_kw, kind == "InitVar")
        return fields

    def field_default(self, fsrc: SourceFile, default: ast.expr | None, name: str, e: ast.Call,
                      src: SourceFile) -> Val:
        """A dataclass field's default: its value, ``field(default=...)``, or what its ``default_factory``
        makes (an empty list or dict, a project class's instance, a function's result)."""
        scope = _Frame(fsrc, {})
        if default is None:
            return self.new(name)
        if not (isinstance(default, ast.Call) and _callee_name(default.func).rsplit(".", 1)[-1] == "field"):
            return self.eval(default, scope)
        options = {k.arg: k.value for k in default.keywords if k.arg}
        if "default" in options:
            return self.eval(options["default"], scope)
        factory = options.get("default_factory")
        if factory is None:
            return self.new(name)
        if isinstance(factory, ast.Name) and factory.id in ("list", "dict", "tuple"):
            empty = self.new(DICT if factory.id == "dict" else "list", "list")
            if factory.id != "dict":
                empty.length = 0
            return empty
        if isinstance(factory, ast.Lambda):
            return self.eval(factory.body, scope)
        made = self.eval(factory, scope)
        if made.kind == "class" and made.cls is not None:
            return self.construct(made, [], {}, e, src)
        if made.kind == "func" and made.func is not None:
            return self.inline(made.func[0], made.func[1], [], {}, e, caller_src=src, closure=made.closure)
        return self.new(name)

    def find_method(self, cls: tuple[SourceFile, ast.ClassDef], name: str,
                    depth: int = 0) -> tuple[SourceFile, ast.FunctionDef] | None:
        """``name`` defined in the class or, first found, in its bases (project or library classes)."""
        src, node = cls
        fn = _find_method(node, name)
        if fn is not None:
            return src, fn
        if depth > 8:
            return None
        for base in self.bases(src, node):
            hit = self.find_method(base, name, depth + 1)
            if hit is not None:
                return hit
        return None

    def bases(self, src: SourceFile, node: ast.ClassDef) -> list[tuple[SourceFile, ast.ClassDef]]:
        """The class's base classes that the interpreter can resolve (project or library)."""
        out = []
        for base in node.bases:
            saved = self.events
            self.events = []
            try:
                bv = self.eval(base, _Frame(src, self.module_globals(src)))
            except (_Return, _Budget, _CallBudget, RecursionError):
                continue
            finally:
                self.events = saved
            if bv.kind == "class" and bv.cls is not None and bv.cls[1] is not node:
                out.append(bv.cls)
        return out

    def super_method(self, frame: _Frame, name: str) -> tuple[SourceFile, ast.FunctionDef] | None:
        """``super().name``: ``name`` in the bases of the class that defines the running method."""
        cls = frame.src.parents.get(id(frame.fn))
        if not isinstance(cls, ast.ClassDef):
            return None
        for base in self.bases(frame.src, cls):
            hit = self.find_method(base, name)
            if hit is not None:
                return hit
        return None


def _dataclass_options(cls: ast.ClassDef) -> dict[str, object]:
    """The literal options of a class's ``@dataclass`` / ``@dataclasses.dataclass`` decorator, with or
    without a call (``{"dataclass": True}`` and, say, ``"init": False``); empty when it has none."""
    for dec in cls.decorator_list:
        call = dec if isinstance(dec, ast.Call) else None
        target = call.func if call is not None else dec
        name = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else ""
        if name == "dataclass":
            options: dict[str, object] = {"dataclass": True}
            for k in call.keywords if call is not None else ():
                if k.arg and isinstance(k.value, ast.Constant):
                    options[k.arg] = k.value.value
            return options
    return {}
