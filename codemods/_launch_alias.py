"""WF106 through a launch: one array passed to a launch as an input its kernel reads and as the output
it overwrites (finding data ``alias``, the argument as written; ``param``, the output parameter).

The launch gets a fresh output, and the argument is rebound to it after the launch::

    omega_out = wp.empty_like(self.omega)
    wp.launch(step, n, inputs=[self.omega, ...], outputs=[omega_out])
    self.omega = omega_out

Whether every forward value stays the same (each thread reads its own element before storing it,
unconditionally) is the rule's judgement, given as the finding's fix safety. Refused when the launch is
not a statement of its own, passes the argument as more than one output, the argument cannot be rebound
(a call, a parameter the caller would not see rebound, a graph capture), or the program reads its
``.grad`` (after the rebinding it would read the fresh output's gradient).
"""

from __future__ import annotations

import ast
import textwrap

import libcst as cst

from codemods._base import FindingCommand
from codemods._cst import call_name, launch_writes
from warpfix.rules._launch_alias import tid_targets


def fresh_launch_output(cmd: FindingCommand, alias: str, param: str) -> None:
    """Plan the rewrite of the launch on ``cmd``'s line that passes ``alias`` as an output."""
    call = cmd.on_line(cst.Call, lambda c: call_name(c) == "launch"
                       and any(cmd.code(o) == alias for o in launch_writes(c)[0]))
    hits = [o for o in launch_writes(call)[0] if cmd.code(o) == alias]
    if len(hits) != 1:
        raise cmd.not_applicable(f"the launch passes {alias} as more than one output")
    stmt = cmd.statement_of(call)
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)):
        raise cmd.not_applicable("the launch is not a statement of its own")
    cmd.check_rebindable(hits[0], stmt)
    if any(n.attr.value == "grad" and cmd.code(n.value) == alias for n in cmd.nodes(cmd.tree, cst.Attribute)):
        raise cmd.not_applicable(f"the program reads {alias}.grad: after the rebinding it would read the fresh "
                                 "output's gradient")
    name = cmd.fresh_name(param, cmd.enclosing(call, cst.FunctionDef))
    cmd.insert_before(stmt, [cmd.statement(f"{name} = {cmd.warp_alias()}.empty_like({alias})\n")])
    cmd.replace(hits[0], cst.Name(name))
    cmd.insert_after(stmt, [cmd.statement(f"{alias} = {name}\n")])
    cmd.context.scratch["summary"] = f"fresh launch output: `{name}` instead of `{alias}`, rebound after the launch"


def stores_every_element(kernel_code: str, targets: list[str]) -> bool:
    """Whether every store target (``u[i, j]``) of the kernel whose source is ``kernel_code`` indexes the thread's
    own ``wp.tid()`` element: a launch over the array's shape then writes each element of a fresh output. A store
    of one slab (``u[s, i, j]``) does not."""
    try:
        tids = tid_targets(ast.parse(textwrap.dedent(kernel_code)).body[0])  # type: ignore[arg-type]
        indexes = [ast.parse(t, mode="eval").body for t in targets]
    except SyntaxError:
        return False
    return all(isinstance(i, ast.Subscript) and ast.unparse(i.slice) in tids for i in indexes)
