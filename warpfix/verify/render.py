"""Text rendering of a verify report: one rich table per backward, then the findings."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from warpfix.report.text import render_text
from warpfix.verify.report import VerifyReport

_VERDICT_STYLE = {"pass": "green", "fail": "bold red", "unreliable": "yellow"}


def _num(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def render_report(report: VerifyReport, *, color: bool = False) -> str:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=color, no_color=not color, color_system="standard" if color else None,
                      highlight=False, emoji=False, width=160)  # fmt: skip
    loss_only = [b for b in report.backwards if b.loss_only]
    for b in report.backwards:
        if b.loss_only:
            if b is loss_only[0]:  # one line for them all
                last = "-" if loss_only[-1].loss is None else f"{loss_only[-1].loss:.7g}"
                console.print(f"{len(loss_only)} later backward(s) of iteration {b.window + 1} run for their loss "
                              f"alone (past the cap), the last at {loss_only[-1].site} (loss = {last})\n")
            continue
        loss = "-" if b.loss is None else f"{b.loss:.7g}"
        console.print(Text(f"tape.backward at {b.site}  (iteration {b.window + 1}, loss = {loss})", style="bold"))
        table = Table()
        table.add_column("parameter")
        table.add_column("max rel err", justify="right")
        table.add_column("AD/FD", justify="right")
        table.add_column("verdict")
        table.add_column("signature / reason", overflow="fold")
        for p in b.params:
            table.add_row(
                p.name,
                _num(p.max_rel_err, ".3g"),
                _num(p.ad_fd_ratio, ".4g"),
                Text(p.verdict, style=_VERDICT_STYLE.get(p.verdict, "")),
                p.signature or p.reason,
            )
        if not b.params:
            table.add_row("-", "-", "-", "-", b.note)
        console.print(table)
        if b.objective != "loss":
            console.print(f"objective: {b.objective}")
        if b.note and b.params:
            console.print(f"note: {b.note}")
        console.print()
    out = buf.getvalue()
    for note in report.notes:
        out += f"note: {note}\n"
    if report.findings:
        out += render_text(report.findings, color=color)
    if report.error:
        out += f"warpfix verify: could not verify: {report.error}\n"
        if report.program_output.strip():
            tail = "\n".join(report.program_output.strip().splitlines()[-15:])
            out += f"--- program output (last lines) ---\n{tail}\n"
    else:
        counts = {v: sum(p.verdict == v for b in report.backwards for p in b.params) for v in _VERDICT_STYLE}
        out += (
            f"{len(report.backwards)} backward(s): {counts['pass']} pass, {counts['fail']} fail, "
            f"{counts['unreliable']} unreliable\n"
        )
    return out
