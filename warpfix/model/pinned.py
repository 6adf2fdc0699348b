"""Code whose current gradients or overwrites the program itself observes: a fix there breaks it.

An automatic fix changes gradients by design (or removes an overwrite). Two kinds of code observe
exactly that, so an edit there is refused (the diagnostic stays, a warning since the program observes
the hazard on purpose; ``data["no_edit"]`` says why):

- a test function (``test*`` in a ``test_*.py`` / ``*_test.py`` file) that asserts on gradients
  (an assertion reading ``.grad``, directly or through a local): it pins the gradients the code
  computes now. Warp's ``test_array.py::test_retain_grad`` asserts the double-counted gradient
  that ``retain_grad=True`` gives on an array written twice.
- code that turns on Warp's own overwrite detector (``wp.config.verify_autograd_array_access =
  True`` in the function or module): the program reports the overwrite, and checks the report
  (Warp's ``test_overwrite.py``). Refused for the overwrite rules (WF1xx).
"""

from __future__ import annotations

import ast
import os

from warpfix.finding import Finding
from warpfix.model import Project
from warpfix.model.grad_reads import reads_grad
from warpfix.model.source import SourceFile

_DETECTOR = "config.verify_autograd_array_access"


def _is_test_file(path: str) -> bool:
    base = os.path.basename(path)
    return base.startswith("test_") or base.endswith("_test.py")


def _enclosing(src: SourceFile, line: int) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Functions whose definition holds ``line`` (decorators included), outermost first."""
    out = []
    for node in src.nodes_of(ast.FunctionDef, ast.AsyncFunctionDef):  # the file's cached node index
        start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        if start <= line <= (node.end_lineno or node.lineno):
            out.append(node)
    return sorted(out, key=lambda fn: fn.lineno)


def _asserts_gradients(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """An assertion in ``fn`` reads a ``.grad`` (directly or through a local bound from one)."""
    names: set[str] = set()
    assigns = [n for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None]
    for _ in range(3):
        for a in assigns:
            if reads_grad(a.value, names):  # type: ignore[arg-type]
                targets = a.targets if isinstance(a, ast.Assign) else [a.target]
                names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    for node in ast.walk(fn):
        if isinstance(node, ast.Assert) and reads_grad(node.test, names):
            return True
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if "assert" in name.lower() and any(
                reads_grad(a, names) for a in [*node.args, *(k.value for k in node.keywords)]
            ):
                return True
    return False


def _turns_on_detector(src: SourceFile, body: ast.AST) -> bool:
    for node in ast.walk(body):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and node.value.value is True
            and any(src.warp_name(t) == _DETECTOR for t in node.targets)
        ):
            return True
    return False


def _module_turns_on_detector(src: SourceFile) -> bool:
    return any(_turns_on_detector(src, stmt) for stmt in src.tree.body if isinstance(stmt, ast.Assign))


def refusal_at(src: SourceFile, line: int, rule: str) -> str | None:
    """Why code at ``line`` of ``src`` must not be edited for ``rule``, or None."""
    functions = _enclosing(src, line)
    if rule.startswith("WF1") and (
        _module_turns_on_detector(src) or any(_turns_on_detector(src, fn) for fn in functions)
    ):
        return (
            "the program turns on Warp's own overwrite check here (`wp.config.verify_autograd_array_access`) "
            "and observes this overwrite"
        )
    if _is_test_file(src.path):
        for fn in functions:
            if fn.name.startswith("test") and _asserts_gradients(fn):
                return f"test `{fn.name}` asserts on the gradients this code computes now"
    return None


def edit_refusal(project: Project, finding: Finding) -> str | None:
    """Why no automatic edit may fix ``finding`` (at its line or a line it relates to), or None."""
    spans = [finding.span, *(sp for sp, _ in finding.related)]
    for span in spans:
        src = project.files.get(span.path)
        if src is None:
            continue
        why = refusal_at(src, span.line, finding.rule)
        if why is not None:
            return why
    return None
