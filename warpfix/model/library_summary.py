"""What a call into an installed library does to its arguments: :class:`Summary`, its array operations
(:class:`Op`) with the arrays named by paths from the parameters, their JSON form (the disk cache of
:mod:`warpfix.model.library`), and the hand-written summaries of entry points no derived summary can
follow (:data:`KNOWN_EFFECTS`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

SUMMARY_FORMAT = 2  # 2: a summary keeps what the call returns

# A path is a parameter name followed by steps: ".attr" or "[key]" (``state_in.particle_q``,
# ``self.params[0]``); ``new:<n>`` is an array the call allocates itself (fresh per call). In the
# hand-written summaries below, ``[*]`` stands for every item of a dict or list the caller built
# (``fields[*]``), and a trailing ``:dofs`` for a warp.fem field's degree-of-freedom array (the
# value itself when the caller passed a plain array, else its ``.dof_values``).
Path = str


@dataclass
class Op:
    """One array operation of a library call, with its arrays named by paths."""

    kind: str  # launch | copy | assign | clone | zero | fill | callback
    kernel: tuple[str, str] | None = None  # launch of a library kernel: (file, kernel name)
    kernel_name: str = ""
    binding: dict[str, Path] = field(default_factory=dict)  # kernel parameter -> path
    reads: list[Path] = field(default_factory=list)
    writes: list[Path] = field(default_factory=list)
    accums: list[Path] = field(default_factory=list)
    method: str = ""  # callback: the method the library calls on the path (``example.step()``)
    in_loop: bool = False  # callback: called inside a loop of the library function
    # only at calls that pass keyword ``add`` a value other than a false literal ("add"), or do not
    # ("!add"); conditions joined by "," must all hold; "" always
    when: str = ""
    # launch: under an ``if`` of the library function the summary could not decide
    # (``if model.tendon_count:``): the call may make it, nothing says it does
    conditional: bool = False

    def to_json(self) -> dict:
        return {"kind": self.kind, "kernel": list(self.kernel) if self.kernel else None,
                "kernel_name": self.kernel_name, "binding": self.binding, "reads": self.reads,
                "writes": self.writes, "accums": self.accums, "method": self.method, "in_loop": self.in_loop,
                "when": self.when, "conditional": self.conditional}

    @classmethod
    def from_json(cls, d: dict) -> Op:
        kernel = tuple(d["kernel"]) if d.get("kernel") else None
        return cls(d["kind"], kernel, d.get("kernel_name", ""), dict(d.get("binding", {})),  # type: ignore[arg-type]
                   list(d.get("reads", [])), list(d.get("writes", [])), list(d.get("accums", [])),
                   d.get("method", ""), bool(d.get("in_loop", False)), d.get("when", ""),
                   bool(d.get("conditional", False)))


@dataclass
class Summary:
    qualname: str  # "newton._src.solvers.semi_implicit.solver_semi_implicit.SolverSemiImplicit.step"
    params: list[str]  # positional parameter names, "self" first for methods
    ops: list[Op]
    # receiver attributes the call binds to what it was given (``__init__``: ``self.model = model``)
    binds: dict[str, Path] = field(default_factory=dict)
    # what the call returns: the first of these paths the call site provides (``new:<n>``: an array
    # the call allocates); empty: an opaque value
    returns: list[Path] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"qualname": self.qualname, "params": self.params, "ops": [o.to_json() for o in self.ops],
                "binds": self.binds, "returns": self.returns}

    @classmethod
    def from_json(cls, d: dict) -> Summary:
        return cls(d["qualname"], list(d["params"]), [Op.from_json(o) for o in d["ops"]], dict(d.get("binds", {})),
                   list(d.get("returns", [])))


@lru_cache(maxsize=1 << 16)
def parse_path(path: Path) -> tuple[str, tuple[tuple[str, str], ...]]:
    """``"a.b[0].c"`` -> ``("a", (("attr", "b"), ("item", "0"), ("attr", "c")))``.

    Cached: replaying summaries parses the same few paths hundreds of thousands of times on a
    library-heavy check, so the result is immutable (it is shared between callers)."""
    steps: list[tuple[str, str]] = []
    i = 0
    n = len(path)
    while i < n and path[i] not in ".[":
        i += 1
    root = path[:i]
    while i < n:
        if path[i] == ".":
            j = i + 1
            while j < n and path[j] not in ".[":
                j += 1
            steps.append(("attr", path[i + 1:j]))
        else:
            j = path.index("]", i)
            steps.append(("item", path[i + 1:j]))
            j += 1
        i = j
    return root, tuple(steps)



# Entry points whose kernels are generated at run time from the integrand passed in (warp.fem
# builds one kernel per integrand and field set), which no summary derived from the source can
# follow. Keyed by the resolved definition (``fem.integrate`` resolves to
# ``warp._src.fem.integrate.integrate`` through warp.fem's imports). Differentiable dataflow only:
# the geometry a domain or field is built on is not followed.
_FEM_INTEGRATE = "warp._src.fem.integrate"
KNOWN_EFFECTS: dict[str, Summary] = {
    # integrate(integrand, domain, quadrature, fields, values, accumulate_dtype, output_dtype, output, ...,
    # add): reads the fields' dofs and the values; overwrites ``output`` (accumulates into it with
    # add=True) or returns a new array
    f"{_FEM_INTEGRATE}.integrate": Summary(
        f"{_FEM_INTEGRATE}.integrate",
        ["integrand", "domain", "quadrature", "fields", "values", "accumulate_dtype", "output_dtype", "output",
         "device", "temporary_store", "kernel_options", "assembly", "add", "bsr_options"],
        [Op("launch", kernel_name="integrate", reads=["fields[*]:dofs", "values[*]"], writes=["output"],
            when="output,!add"),
         Op("launch", kernel_name="integrate", reads=["fields[*]:dofs", "values[*]"], accums=["output"],
            when="output,add"),
         Op("launch", kernel_name="integrate", reads=["fields[*]:dofs", "values[*]"], writes=["new:0"],
            when="!output")],
        returns=["output", "new:0"],
    ),
    # interpolate(integrand, dest, at, dest_space, dim, fields, values, ...): reads the integrand when
    # it is a field, the fields' dofs and the values; overwrites ``dest``'s dofs
    f"{_FEM_INTEGRATE}.interpolate": Summary(
        f"{_FEM_INTEGRATE}.interpolate",
        ["integrand", "dest", "at", "dest_space", "dim", "fields", "values", "reduction", "device",
         "kernel_options", "temporary_store", "bsr_options"],
        [Op("launch", kernel_name="interpolate", reads=["integrand:dofs", "fields[*]:dofs", "values[*]"],
            writes=["dest:dofs"])],
    ),
}
