"""A ring of buffers on one tape (``work[k % 2]`` read, ``work[(k + 1) % 2]`` written), in the shapes of blind
corpus 3: which rule owns it (WF104, not WF103 for a name that only holds a slot, not WF107 for a struct's fields
read and written under the two names of the rotation), and when the fresh-output fix would change the forward."""

from __future__ import annotations

import pytest

from warpfix.engine import check_sources
from warpfix.fixes import compute_edits

JACOBI = """
import warp as wp

SWEEPS = 4


@wp.kernel
def sweep(u_in: wp.array(dtype=float), f: wp.array(dtype=float), u_out: wp.array(dtype=float)):
    i = wp.tid()
{store}


@wp.kernel
def misfit(u: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, u[i] * u[i])


class Field:
    def __init__(self):
        self.dof_values = None


f = wp.ones(8, dtype=float, requires_grad=True)
work = [wp.zeros(8, dtype=float, requires_grad=True) for _ in range(2)]
field = Field()
{alias}
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    for k in range(SWEEPS):
        wp.launch(sweep, dim=8, inputs=[work[k % 2], f], outputs=[work[(k + 1) % 2]])
    wp.launch(misfit, dim=8, inputs=[{final}], outputs=[loss])
tape.backward(loss)
"""
STORE = "    u_out[i] = 0.5 * u_in[i] * u_in[i] + f[i]"


def _program(alias: str = "", store: str = STORE) -> str:
    final = "field.dof_values" if alias else "work[SWEEPS % 2]"
    return JACOBI.format(store=store, alias=alias, final=final)


def test_a_name_holding_a_slot_of_the_ring_is_not_the_alias_that_made_it() -> None:
    """``field.dof_values = work[SWEEPS % 2]`` names the slot the last sweep writes; the hazard is the ring's
    (WF104), not an aliasing rebinding (WF103)."""
    text = _program("field.dof_values = work[SWEEPS % 2]")
    rules = sorted({f.rule for f in check_sources({"main.py": text}).findings if f.rule.startswith("WF10")})
    assert rules == ["WF104"]


@pytest.mark.parametrize(("alias", "store", "made", "why"), [
    ("", STORE, "wp.empty_like", None),
    ("field.dof_values = work[SWEEPS % 2]", STORE, None,
     "`field.dof_values` also holds a slot of work (line 27): a fresh array in the slot would not reach it"),
    ("", "    if f[i] > 0.5:\n        u_out[i] = 0.5 * u_in[i] * u_in[i] + f[i]", "wp.clone", None),
])
def test_a_fresh_output_per_step_only_where_it_keeps_the_forward(
    alias: str, store: str, made: str | None, why: str | None,
) -> None:
    """A fresh array in the written slot each step: not when another name holds a slot (it would go on reading
    the old array); a copy of the slot when the kernel may leave elements unwritten (a fresh array would hold
    other values there, the copy holds the slot's own)."""
    text = _program(alias, store)
    found = [f for f in check_sources({"main.py": text}).findings if f.rule == "WF104"]
    assert len(found) == 1
    result = compute_edits({"main.py": text}, found)
    if why is None:
        assert f"work[(k + 1) % 2] = {made}(work[(k + 1) % 2])" in result.new_sources["main.py"]
    else:
        assert result.new_sources == {} and why in result.skipped[0][1], result.skipped


STRUCTS = """
import warp as wp

STEPS = 4


@wp.struct
class Particles:
    x: wp.array(dtype=float)
    v: wp.array(dtype=float)


@wp.kernel
def integrate(p: Particles, k: wp.array(dtype=float), nxt: Particles):
    i = wp.tid()
    a = -k[0] * p.x[i] * p.x[i]
    nxt.v[i] = p.v[i] + 0.1 * a
    nxt.x[i] = p.x[i] + 0.1 * nxt.v[i]


@wp.kernel
def energy(p: Particles, loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, p.x[i] * p.x[i])


def make():
    s = Particles()
    s.x = wp.ones(8, dtype=float, requires_grad=True)
    s.v = wp.zeros(8, dtype=float, requires_grad=True)
    return s


k = wp.ones(1, dtype=float, requires_grad=True)
states = [make() for _ in range(2)]
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    for t in range(STEPS):
        cur, nxt = states[t % 2], states[(t + 1) % 2]
        wp.launch(integrate, dim=8, inputs=[cur, k], outputs=[nxt])
    wp.launch(energy, dim=8, inputs=[states[STEPS % 2]], outputs=[loss])
tape.backward(loss)
"""


def test_struct_fields_read_and_written_under_the_two_names_of_a_rotation_are_a_ping_pong() -> None:
    """``cur.x`` read, ``nxt.x`` written, both slots of one ring: WF104 at the rotation, not WF107 (a struct's
    field overwritten under the name it was read by)."""
    found = {(f.rule, f.line) for f in check_sources({"main.py": STRUCTS}).findings if f.rule in ("WF104", "WF107")}
    line = STRUCTS.splitlines().index("        cur, nxt = states[t % 2], states[(t + 1) % 2]") + 1
    assert found == {("WF104", line)}
