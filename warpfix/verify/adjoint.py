"""WF804: check every ``@wp.func_grad`` of the program against FD of its own forward.

A generated test kernel evaluates the forward on sampled inputs; its tape backward (which
runs the custom adjoint) is compared with central FD of ``sum(w * f(x))`` per thread.
End-to-end FD cannot see a wrong adjoint whose effect is drowned by float32 cancellation;
this check isolates the function, where FD is sharp.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import math
import os
import re
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np

from . import judge

SAMPLES = 16
STEPS = (1e-2, 1e-3, 1e-4)


def _float_type(wp: Any, t: Any) -> tuple[str, int] | None:
    """(warp type expression, component count) for float32 scalars and vectors, else None (not checked)."""
    if t is float:
        t = wp.float32
    if t is wp.float32:
        return ("wp.float32", 1)
    length = getattr(t, "_length_", None)
    scalar = getattr(t, "_wp_scalar_type_", None)
    if length and scalar is wp.float32 and getattr(t, "_shape_", (length,)) == (length,):
        return (f"wp.types.vector(length={length}, dtype=wp.float32)", length)
    return None


#: forward functions passed to ``wp.func_grad`` since :func:`install_hook`
_FORWARDS: list[Any] = []


def install_hook(wp: Any) -> None:
    """Remember every forward function that receives a ``@wp.func_grad`` from now on."""
    ctx = wp._src.context
    orig = ctx.func_grad

    def func_grad(forward_fn: Any) -> Any:
        decorate = orig(forward_fn)

        def wrapper(grad_fn: Any) -> Any:
            result = decorate(grad_fn)
            _FORWARDS.append(forward_fn)
            return result

        return wrapper

    func_grad.__wrapped__ = orig  # type: ignore[attr-defined]
    ctx.func_grad = func_grad
    wp.func_grad = func_grad


def _custom_grad_functions() -> list[Any]:
    out: dict[int, Any] = {}
    for fwd in _FORWARDS:
        for f in [fwd, *getattr(fwd, "user_overloads", {}).values()]:
            if getattr(f, "custom_grad_func", None) is not None:
                out[id(f)] = f
    return list(out.values())


def _kernel_source(arg_types: list[str], ret: str) -> str:
    params = ", ".join(f"a{i}: wp.array(dtype={t})" for i, t in enumerate(arg_types))
    call = ", ".join(f"a{i}[i]" for i in range(len(arg_types)))
    return (
        "import warp as wp\n"
        "from {ctx} import FWD\n\n\n"
        "@wp.kernel\n"
        f"def fwd_kernel({params}, out: wp.array(dtype={ret})):\n"
        "    i = wp.tid()\n"
        f"    out[i] = FWD({call})\n"
    )


def reachable_functions(kernels: list[Any]) -> set[int]:
    """Ids of the user functions the kernels call, directly or through other functions."""
    seen: set[int] = set()
    stack = [c for k in kernels for c in getattr(k.adj, "called_user_functions", {})]
    while stack:
        f = stack.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        stack.extend(getattr(getattr(f, "adj", None), "called_user_functions", {}))
    return seen


def check_custom_adjoints(wp: Any, relpath: Any, kernels: list[Any]) -> list[dict[str, Any]]:
    """WF804 findings (as dicts) for the custom adjoints the given (taped) kernels use that disagree
    with FD of their forward."""
    used = reachable_functions(kernels)
    findings = []
    for func in _custom_grad_functions():
        if id(func) not in used:
            continue
        try:
            found = _check_one(wp, func, relpath)
        except Exception:  # noqa: BLE001 - a function this check cannot host is skipped, not a verdict
            found = None
        if found is not None:
            findings.append(found)
    return findings


def _check_one(wp: Any, func: Any, relpath: Any) -> dict[str, Any] | None:
    arg_names = list(func.input_types.keys())
    arg_specs = [_float_type(wp, t) for t in func.input_types.values()]
    ret_type = func.value_type
    if ret_type is None and func.adj.return_var:
        ret_type = func.adj.return_var[0].type
    ret_spec = _float_type(wp, ret_type)
    if not arg_specs or any(s is None for s in arg_specs) or ret_spec is None:
        return None
    src = _kernel_source([s[0] for s in arg_specs], ret_spec[0])  # type: ignore[index]
    digest = hashlib.sha1((src + func.key + inspect.getsource(func.func)).encode()).hexdigest()[:12]
    ctx_name = f"_warpfix_adjctx_{digest}"
    ctx = types.ModuleType(ctx_name)
    ctx.FWD = func  # type: ignore[attr-defined]
    sys.modules[ctx_name] = ctx
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "warpfix" / "adjoint"
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"_warpfix_adj_{digest}.py"
    text = src.replace("{ctx}", ctx_name)
    if not path.exists() or path.read_text() != text:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)  # atomic: concurrent probes never import a half-written file
    mod_name = f"_warpfix_adj_{digest}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    spec.loader.exec_module(module)
    kernel = module.fwd_kernel

    rng = np.random.default_rng(1)
    inputs_np = []
    for _, comps in arg_specs:  # type: ignore[misc]
        shape = (SAMPLES,) if comps == 1 else (SAMPLES, comps)
        inputs_np.append(rng.uniform(0.3, 1.3, size=shape).astype(np.float32))
    ret_comps = ret_spec[1]
    w = rng.uniform(0.5, 1.5, size=(SAMPLES,) if ret_comps == 1 else (SAMPLES, ret_comps)).astype(np.float32)
    wtypes = [kernel.adj.args[i].type.dtype for i in range(len(arg_specs))]
    rtype = kernel.adj.args[-1].type.dtype
    device = wp.get_device("cpu")

    def forward(values: list[np.ndarray]) -> np.ndarray:
        arrs = [wp.array(v, dtype=t, device=device) for v, t in zip(values, wtypes, strict=True)]
        out = wp.zeros(SAMPLES, dtype=rtype, device=device)
        wp.launch(kernel, dim=SAMPLES, inputs=[*arrs, out], device=device)
        return (out.numpy().astype(np.float64) * w).reshape(SAMPLES, -1).sum(axis=1)

    arrs = [wp.array(v, dtype=t, device=device, requires_grad=True) for v, t in zip(inputs_np, wtypes, strict=True)]
    out = wp.zeros(SAMPLES, dtype=rtype, device=device, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, dim=SAMPLES, inputs=[*arrs, out], device=device)
    tape.backward(grads={out: wp.array(w, dtype=rtype, device=device)})
    base = forward(inputs_np)

    wrong: list[tuple[float, str, float]] = []  # (max rel err, input name, median AD/FD ratio)
    for k, (name, (_, comps)) in enumerate(zip(arg_names, arg_specs, strict=True)):  # type: ignore[misc]
        ad_all = arrs[k].grad.numpy().astype(np.float64).reshape(SAMPLES, comps)
        for c in range(comps):
            ladders: list[list[judge.StepResult]] = [[] for _ in range(SAMPLES)]
            for h in STEPS:
                plus = [v.copy() for v in inputs_np]
                minus = [v.copy() for v in inputs_np]
                p = plus[k].reshape(SAMPLES, comps)
                m = minus[k].reshape(SAMPLES, comps)
                x = inputs_np[k].reshape(SAMPLES, comps)[:, c].astype(np.float64)
                p[:, c] = (x + h).astype(np.float32)
                m[:, c] = (x - h).astype(np.float32)
                t_eff = (p[:, c].astype(np.float64) - m[:, c].astype(np.float64)) / 2.0
                lp, lm = forward(plus), forward(minus)
                for i in range(SAMPLES):
                    ladders[i].append(judge.StepResult(float(t_eff[i]), float(lp[i]), float(lm[i])))
            samples = [
                judge.judge_sample("element", float(ad_all[i, c]), ladders[i],
                                   float(np.spacing(np.float32(abs(base[i])))) * max(ret_comps, 1), index=i)
                for i in range(SAMPLES)
            ]  # fmt: skip
            verdict = judge.classify(samples)
            if verdict.verdict == judge.FAIL:
                err = verdict.max_rel_err if verdict.max_rel_err is not None else math.inf
                ratio = verdict.ad_fd_ratio if verdict.ad_fd_ratio is not None else math.nan
                wrong.append((err, name if comps == 1 else f"{name}[{c}]", ratio))
    if not wrong:
        return None
    grad_fn = func.custom_grad_func.func
    path = relpath(inspect.getsourcefile(grad_fn) or "<unknown>")
    line = grad_fn.__code__.co_firstlineno
    err, label, ratio = max(wrong)
    factors = ", ".join(f"`{lab}` {r:.4g}x" for _, lab, r in wrong)
    message = (f"the @wp.func_grad of `{func.key}` disagrees with finite differences of its forward on sampled "
               f"inputs: adjoint / FD factor {factors} (max relative error {err:.3g})")
    found: dict[str, Any] = {
        "rule": "WF804",
        "path": path,
        "line": line,
        "message": message,
        "data": {"function": func.key, "input": label, "factor": ratio, "max_rel_err": err,
                 "factors": {lab: r for _, lab, r in wrong}},  # fmt: skip
    }
    untouched = _unwritten_adjoints(grad_fn, {lab.split("[")[0] for _, lab, _ in wrong})
    if untouched == {lab.split("[")[0] for _, lab, _ in wrong}:
        # the adjoint never writes these inputs' adjoints: held constant on purpose (a smoothing ``eps``) or
        # forgotten; only a gradient that reaches them through this function is lost, so no error
        names = ", ".join(f"`{n}`" for n in sorted(untouched))
        found["severity"] = "warning"
        found["message"] = (f"the @wp.func_grad of `{func.key}` never writes the adjoint of {names}: a gradient "
                            f"reaching {names} through `{func.key}` is dropped (FD of the forward: {factors})")
    return found


def _unwritten_adjoints(grad_fn: Any, names: set[str]) -> set[str]:
    """The inputs among ``names`` whose adjoint ``grad_fn``'s source never writes (no ``wp.adjoint[name]``)."""
    try:
        source = inspect.getsource(grad_fn)
    except (OSError, TypeError):
        return set()
    return {n for n in names if not re.search(rf"adjoint\[\s*{re.escape(n)}\s*\]", source)}
