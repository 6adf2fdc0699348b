"""WF403's static-bound codemod: ``range(n)`` -> ``range(wp.static(C))`` only when every launch of the
kernel, in every file that imports it, binds ``n`` to the same constant ``C <= max_unroll``."""

from __future__ import annotations

import pytest

from warpfix.finding import Finding, Fix, FixSafety, Severity, Span
from warpfix.fixes import compute_edits

KERNEL = '''import warp as wp

CELLS = 12


@wp.kernel
def transmittance(sigma: wp.array(dtype=float), n: int, image: wp.array(dtype=float)):
    i = wp.tid()
    t = float(1.0)
    for j in range(n):
        t = t * wp.exp(-sigma[j])
    image[i] = t / float(n)
'''
LAUNCH = "wp.launch(transmittance, dim=4, inputs=[sigma, {}], outputs=[image])\n"


def _finding(line: int, path: str = "sim.py", **data: object) -> Finding:
    return Finding("WF403", "dynamic-loop-carry", Severity.ERROR, Span(path, line, 9, line, 9), "carry",
                   Fix(FixSafety.SAFE, ""), {"taped": True, **data})


def _fix(sources: dict[str, str], finding: Finding) -> tuple[dict[str, str], str]:
    result = compute_edits(sources, [finding])
    return result.new_sources, (result.skipped[0][1] if result.skipped else result.note(result.applied[0]))


def test_module_constant_passed_everywhere_becomes_the_static_bound() -> None:
    sources = {"sim.py": KERNEL + LAUNCH.format("CELLS"), "main.py": "from sim import transmittance, CELLS\n"
               + LAUNCH.format("CELLS")}
    new, why = _fix(sources, _finding(11))
    assert new == {"sim.py": sources["sim.py"].replace("range(n)", "range(wp.static(CELLS))")}
    assert "static bound: every launch passes n = CELLS (12 <= 16)" in why


def test_literal_and_use_after_the_loop() -> None:
    """The span on the use after the loop (``t / n``) finds the kernel's one loop; a literal 5 is written as 5."""
    sources = {"sim.py": KERNEL.replace("CELLS = 12", "CELLS = 7") + LAUNCH.format("5")}
    new, _ = _fix(sources, _finding(12))
    assert "for j in range(wp.static(5)):" in new["sim.py"]


@pytest.mark.parametrize(
    ("main", "why"),
    [
        (LAUNCH.format("8"), "pass different bounds [8, 12]"),
        (LAUNCH.format("len(sigma)"), "passes `len(sigma)`, not an integer literal"),
        ("k = transmittance\n", "used at main.py:2 other than as a launched kernel"),
        ("N = 3\nN = 12\n" + LAUNCH.format("N"), "passes `N`, not an integer literal or a module constant"),
        ("from sim import CELLS\ndef f():\n    CELLS = 3\n    " + LAUNCH.format("CELLS"), "passes `CELLS`"),
    ],
)
def test_refused_unless_every_launch_binds_the_same_constant(main: str, why: str) -> None:
    sources = {"sim.py": KERNEL + LAUNCH.format("CELLS"), "main.py": "from sim import transmittance\n" + main}
    new, reason = _fix(sources, _finding(11))
    assert new == {} and why in reason, reason


def test_a_sibling_program_with_a_same_named_kernel_does_not_count() -> None:
    """Launches resolve through imports: another program's `transmittance` with bound 40 is not this kernel's."""
    other = KERNEL.replace("CELLS = 12", "CELLS = 40") + LAUNCH.format("CELLS")
    sources = {"a/sim.py": KERNEL + LAUNCH.format("CELLS"), "b/sim.py": other}
    new, _ = _fix(sources, _finding(11, "a/sim.py"))
    assert list(new) == ["a/sim.py"]


@pytest.mark.parametrize(
    ("kernel", "line", "why"),
    [
        (KERNEL.replace("CELLS = 12", "CELLS = 40"), 11, "more than max_unroll (16)"),
        (KERNEL.replace("        t = t * wp.exp(-sigma[j])", "        t = t * wp.exp(-sigma[j])\n        if t < 0.1:\n"
                        "            break"), 11, "holds break/continue"),
        (KERNEL.replace("@wp.kernel", "@wp.func"), 11, "in a @wp.func"),
        (KERNEL.replace("range(n)", "range(n + 1)"), 11, "is not `range(<parameter>)`"),
        (KERNEL.replace("    for j in range(n):\n        t = t * wp.exp(-sigma[j])",
                        "    for k in range(2):\n        for j in range(n):\n            t = t * wp.exp(-sigma[j])"),
         12, "nested in another loop"),
    ],
)
def test_refused_shapes(kernel: str, line: int, why: str) -> None:
    new, reason = _fix({"sim.py": kernel + LAUNCH.format("CELLS")}, _finding(line))
    assert new == {} and why in reason, reason


def test_no_launch_is_refused() -> None:
    new, reason = _fix({"sim.py": KERNEL}, _finding(11))
    assert new == {} and "no launch of transmittance found" in reason


FUNC = '''import warp as wp


@wp.func
def weighted_mean(x: wp.array(dtype=float), w: wp.array(dtype=float), start: int, n: int):
    s = float(0.0)
    t = float(0.0)
    for j in range(n):
        s += w[start + j] * x[start + j]
        t += w[start + j]
    return s / t


@wp.kernel
def pool(x: wp.array(dtype=float), w: wp.array(dtype=float), n: int, out: wp.array(dtype=float)):
    i = wp.tid()
    m = weighted_mean(x, w, i * n, n)
    out[i] = m * m
'''


def test_post_processing_of_a_looped_func_moves_to_its_caller() -> None:
    """RULES.md: return the raw accumulators, the caller does the division (same operations, outside the loop)."""
    new, why = _fix({"sim.py": FUNC}, _finding(11, kernel="weighted_mean", loop_line=8, after_loop=True))
    want = FUNC.replace("    return s / t\n", "    return s, t\n").replace(
        "    m = weighted_mean(x, w, i * n, n)\n", "    m_s, m_t = weighted_mean(x, w, i * n, n)\n    m = m_s / m_t\n")
    assert new == {"sim.py": want}
    assert "post-processing to the caller: weighted_mean() returns s, t" in why


def test_post_processing_substitutes_parameters_with_the_call_arguments() -> None:
    code = FUNC.replace("    return s / t\n", "    return s / (t * float(n))\n")
    new, _ = _fix({"sim.py": code}, _finding(11))
    assert "    m = m_s / (m_t * float(n))\n" in new["sim.py"]
    code = FUNC.replace("    return s / t\n", "    return s / float(start)\n")
    new, _ = _fix({"sim.py": code}, _finding(11))
    assert "    m_s = weighted_mean(x, w, i * n, n)\n    m = m_s / float((i * n))\n" in new["sim.py"]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (("    m = weighted_mean(x, w, i * n, n)\n    out[i] = m * m\n", "    out[i] = weighted_mean(x, w, i * n, n)\n"),
         "is not a statement `name = weighted_mean(...)`"),
        (("    return s / t\n", "    r = s / t\n    return r\n"), "reads `r`, neither a parameter"),
        (("i * n, n)", "wp.tid() * n, n)"), "passes a call as `start`"),
        (("    i = wp.tid()\n", "    i = wp.tid()\n    f = weighted_mean\n"), "used other than called"),
    ],
)
def test_post_processing_refused_shapes(change: tuple[str, str], why: str) -> None:
    code = FUNC.replace(*change)
    line = next(n for n, text in enumerate(code.splitlines(), 1) if text.strip().startswith("return"))
    new, reason = _fix({"sim.py": code}, _finding(line))
    assert new == {} and why in reason, reason


def test_post_processing_refused_when_another_file_calls_the_func() -> None:
    other = "from sim import weighted_mean\n"
    new, reason = _fix({"sim.py": FUNC, "other.py": other + "y = weighted_mean(a, b, 0, 4)\n"}, _finding(11))
    assert new == {} and "also called from other.py" in reason, reason


SHADE = '''import warp as wp


@wp.struct
class Lights:
    dirs: wp.array(dtype=wp.vec3)
    n: int


@wp.kernel
def shade(normals: wp.array(dtype=wp.vec3), albedo: wp.array(dtype=float), lights: Lights,
          image: wp.array(dtype=float)):
    i = wp.tid()
    color = albedo[i]
    lambert = float(0.0)
    # lambertian lighting
    for j in range(lights.n):
        val = wp.dot(normals[i], lights.dirs[j])
        if val < 0.0:
            val = 0.0
        lambert = lambert + val
    image[i] = lambert * color
'''
SHADE_LOOP = '''    for j in range(lights.n):
        val = wp.dot(normals[i], lights.dirs[j])
        if val < 0.0:
            val = 0.0
        lambert = lambert + val
'''


def test_a_loop_whose_bound_cannot_be_static_becomes_a_func() -> None:
    """diffray's shape: the bound is a struct field; the use after the loop moves to the value a @wp.func returns."""
    new, why = _fix({"sim.py": SHADE}, _finding(22, loop_line=17, after_loop=True))
    func = ("@wp.func\ndef _shade_loop(lights: Any, normals: Any, i: Any, lambert: Any):\n"
            + SHADE_LOOP + "    return lambert\n")
    want = (SHADE.replace("import warp as wp\n", "from typing import Any\n\nimport warp as wp\n")
            .replace(SHADE_LOOP, "    lambert = _shade_loop(lights, normals, i, lambert)\n")
            .replace("@wp.kernel\n", func + "\n\n@wp.kernel\n"))
    assert new == {"sim.py": want}, new.get("sim.py")
    assert "is not `range(<parameter>)`" not in why and "loop into a @wp.func" in why
    assert "# lambertian lighting\n    lambert = _shade_loop(" in new["sim.py"]  # the comment stays with the call
    again, _ = _fix(new, _finding(22, loop_line=17, after_loop=True))
    assert again == {}  # nothing left to move: the line now reads the call's value


@pytest.mark.parametrize(
    ("imports", "want"),
    [
        # the standard-library group: after its straight imports and the from-imports that sort before typing
        ("import os\nimport sys\n\nimport warp as wp\n",
         "import os\nimport sys\nfrom typing import Any\n\nimport warp as wp\n"),
        ("import math\nfrom dataclasses import dataclass\nfrom pathlib import Path\n\nimport warp as wp\n",
         "import math\nfrom dataclasses import dataclass\nfrom pathlib import Path\nfrom typing import Any\n\n"
         "import warp as wp\n"),
        ("import os\nfrom warnings import warn\n\nimport warp as wp\n",
         "import os\nfrom typing import Any\nfrom warnings import warn\n\nimport warp as wp\n"),
        ("from warnings import warn\n\nimport warp as wp\n",
         "from typing import Any\nfrom warnings import warn\n\nimport warp as wp\n"),
        # no standard-library import: a group of its own, after `from __future__` and the module's comments
        ('"""Doc."""\n\nfrom __future__ import annotations\n\n# deps\nimport numpy as np\nimport warp as wp\n',
         '"""Doc."""\n\nfrom __future__ import annotations\n\n# deps\nfrom typing import Any\n\n'
         "import numpy as np\nimport warp as wp\n"),
        # an existing `from typing import ...` takes the name; one that already has it is left alone
        ("from typing import TYPE_CHECKING\n\nimport warp as wp\n",
         "from typing import TYPE_CHECKING, Any\n\nimport warp as wp\n"),
        ("from typing import Any, Optional\n\nimport warp as wp\n",
         "from typing import Any, Optional\n\nimport warp as wp\n"),
        ("from typing import (\n    TYPE_CHECKING,\n    Optional,\n)\n\nimport warp as wp\n",
         "from typing import (\n    TYPE_CHECKING,\n    Any,\n    Optional,\n)\n\nimport warp as wp\n"),
        ("from typing import Optional, cast\n\nimport warp as wp\n",
         "from typing import Any, Optional, cast\n\nimport warp as wp\n"),
    ],
)
def test_the_typing_import_goes_where_isort_puts_it(imports: str, want: str) -> None:
    """ruff's I001 stays quiet on a file whose imports were sorted before the rewrite."""
    source = SHADE.replace("import warp as wp\n", imports)
    lines = source.splitlines()
    use, loop = lines.index("    image[i] = lambert * color") + 1, lines.index("    for j in range(lights.n):") + 1
    new, _ = _fix({"sim.py": source}, _finding(use, loop_line=loop, after_loop=True))
    assert new["sim.py"].split("\n\n\n@wp.struct")[0] + "\n" == want, new["sim.py"][:200]


def test_a_kernel_made_by_a_factory_keeps_its_loop() -> None:
    """The loop may read the factory's variables, which a module-level function would not see."""
    body = SHADE.split("@wp.kernel\n", 1)[1].replace("\n    ", "\n        ").replace("\n        \n", "\n\n")
    code = SHADE.split("@wp.kernel\n", 1)[0] + "def make_shade():\n    @wp.kernel\n    " + body + "    return shade\n"
    loop = next(n for n, t in enumerate(code.splitlines(), 1) if t.startswith("        for j"))
    use = next(n for n, t in enumerate(code.splitlines(), 1) if t.startswith("        image[i]"))
    new, why = _fix({"sim.py": code}, _finding(use, loop_line=loop, after_loop=True))
    assert new == {} and "the kernel is defined inside a function or class" in why, why


def test_several_values_the_loop_sums_come_back_as_a_tuple() -> None:
    code = SHADE.replace("        lambert = lambert + val\n", "        lambert = lambert + val\n        hits += 1.0\n")
    code = code.replace("    lambert = float(0.0)\n", "    lambert = float(0.0)\n    hits = float(0.0)\n")
    code = code.replace("    image[i] = lambert * color\n", "    image[i] = lambert * color / hits\n")
    new, _ = _fix({"sim.py": code}, _finding(24, loop_line=18, after_loop=True))
    assert "    lambert, hits = _shade_loop(lights, normals, i, lambert, hits)\n" in new["sim.py"]
    assert "    return lambert, hits\n" in new["sim.py"]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (("lambert = lambert + val", "lambert = lambert * val"), "carried across iterations by `lambert = lambert * val`"),
        (("lambert = lambert + val", "lambert = lambert + val * lambert"), "not summed"),
        (("            val = 0.0\n", "            break\n"), "holds `break`"),
        (("    image[i] = lambert * color\n", "    image[i] = lambert * color * val\n"),
         "`val` is first assigned in the loop and read after it"),
        (("    image[i] = lambert * color\n", "    image[i] = lambert * color * float(j)\n"),
         "the loop variable `j` is read after the loop"),
        (("    color = albedo[i]\n", "    color = albedo[i]\n    v = wp.vec3()\n"),
         "the loop updates `v[0]` in place"),
    ],
)
def test_a_loop_that_is_not_a_sum_stays(change: tuple[str, str], why: str) -> None:
    code = SHADE.replace(*change)
    if change[1].endswith("v = wp.vec3()\n"):  # the loop updates a local vector in place
        code = code.replace("        lambert = lambert + val\n", "        v[0] = val\n").replace(
            "lambert * color\n", "v[0] * color\n")
    loop = next(n for n, t in enumerate(code.splitlines(), 1) if t.startswith("    for "))
    use = next(n for n, t in enumerate(code.splitlines(), 1) if t.startswith("    image[i]"))
    new, reason = _fix({"sim.py": code}, _finding(use, loop_line=loop, after_loop=True))
    assert new == {} and "nor can the loop become a @wp.func" in reason and why in reason, reason
