# Inverse heat-source problem on the unit square with warp.fem.
#   -div(k grad u) + a u + b u^3 = f   (natural boundary conditions, radiative-like loss)
# The source f is a P1 field whose nodal values are the unknowns. The stiffness
# matrix is assembled once; each forward assembles the load vector with
# fem.integrate and runs a damped nonlinear-Jacobi solve on the tape, then measures the
# misfit to a reference temperature field.
import numpy as np
import warp as wp
import warp.fem as fem

wp.config.quiet = True
wp.set_device("cpu")

RES = 6
SWEEPS = 24
OMEGA = 0.8
K_DIFF = 0.05
A_REACT = 1.0
B_CUBIC = 0.5
ALPHA = 1.0e-3
LR = 4.0


@fem.integrand
def stiffness_form(s: fem.Sample, u: fem.Field, v: fem.Field, k: float, a: float):
    return k * wp.dot(fem.grad(u, s), fem.grad(v, s)) + a * u(s) * v(s)


@fem.integrand
def load_form(s: fem.Sample, f: fem.Field, v: fem.Field):
    return f(s) * v(s)


@fem.integrand
def lumped_mass_form(s: fem.Sample, v: fem.Field):
    return v(s)


@fem.integrand
def misfit_form(s: fem.Sample, u: fem.Field, u_ref: fem.Field, f: fem.Field, alpha: float):
    d = u(s) - u_ref(s)
    return d * d + alpha * f(s) * f(s)


@wp.kernel
def extract_inv_diagonal(
    offsets: wp.array(dtype=int), columns: wp.array(dtype=int), values: wp.array(dtype=float),
    inv_diag: wp.array(dtype=float),
):
    i = wp.tid()
    for p in range(offsets[i], offsets[i + 1]):
        if columns[p] == i:
            inv_diag[i] = 1.0 / values[p]


@wp.kernel
def jacobi_sweep(
    offsets: wp.array(dtype=int),
    columns: wp.array(dtype=int),
    values: wp.array(dtype=float),
    inv_diag: wp.array(dtype=float),
    lumped: wp.array(dtype=float),
    rhs: wp.array(dtype=float),
    u_in: wp.array(dtype=float),
    b: float,
    omega: float,
    u_out: wp.array(dtype=float),
):
    i = wp.tid()
    au = float(0.0)
    for p in range(offsets[i], offsets[i + 1]):
        au += values[p] * u_in[columns[p]]
    ui = u_in[i]
    residual = rhs[i] - au - b * lumped[i] * ui * ui * ui
    u_out[i] = ui + omega * inv_diag[i] * residual


@wp.kernel
def gradient_step(x: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * g[i]


def reference_source(pos):
    x, y = pos[:, 0], pos[:, 1]
    return 4.0 * np.exp(-((x - 0.3) ** 2 + (y - 0.65) ** 2) / 0.02) + 2.0 * np.exp(-((x - 0.7) ** 2 + (y - 0.3) ** 2) / 0.03)


def main():
    geo = fem.Grid2D(res=wp.vec2i(RES, RES))
    space = fem.make_polynomial_space(geo, degree=1, dtype=float)
    domain = fem.Cells(geometry=geo)
    test = fem.make_test(space=space, domain=domain)
    trial = fem.make_trial(space=space, domain=domain)
    n = space.node_count()

    K = fem.integrate(stiffness_form, fields={"u": trial, "v": test}, values={"k": K_DIFF, "a": A_REACT},
                      output_dtype=float)
    offsets, columns, values = K.offsets, K.columns, K.values
    inv_diag = wp.zeros(n, dtype=float)
    wp.launch(extract_inv_diagonal, dim=n, inputs=[offsets, columns, values], outputs=[inv_diag])
    lumped = fem.integrate(lumped_mass_form, fields={"v": test}, output_dtype=float)

    node_pos = space.node_positions().numpy()

    # reference temperature: solve with the reference source (no tape, many sweeps)
    f_ref = fem.make_discrete_field(space=space)
    f_ref.dof_values.assign(reference_source(node_pos).astype(np.float32))
    b_ref = fem.integrate(load_form, fields={"f": f_ref, "v": test}, output_dtype=float)
    u_a = wp.zeros(n, dtype=float)
    u_b = wp.zeros(n, dtype=float)
    for _ in range(400):
        wp.launch(jacobi_sweep, dim=n, inputs=[offsets, columns, values, inv_diag, lumped, b_ref, u_a, B_CUBIC, OMEGA], outputs=[u_b])
        u_a, u_b = u_b, u_a
    u_ref = fem.make_discrete_field(space=space)
    u_ref.dof_values.assign(u_a)

    # unknown source, starts flat
    f = fem.make_discrete_field(space=space)
    f.dof_values = wp.full(n, 1.0, dtype=float, requires_grad=True)
    theta = f.dof_values

    rhs = wp.zeros(n, dtype=float, requires_grad=True)
    iterates = [wp.zeros(n, dtype=float, requires_grad=True) for _ in range(SWEEPS + 1)]
    u = fem.make_discrete_field(space=space)
    u.dof_values = iterates[-1]
    loss = wp.zeros(1, dtype=float, requires_grad=True)

    probe = [0, n // 3, n // 2, n - 1]
    tape = wp.Tape()
    for it in range(5):
        with tape:
            fem.integrate(load_form, fields={"f": f, "v": test}, output=rhs)
            for k in range(SWEEPS):
                wp.launch(jacobi_sweep, dim=n, inputs=[offsets, columns, values, inv_diag, lumped, rhs, iterates[k], B_CUBIC, OMEGA],
                          outputs=[iterates[k + 1]])
            fem.integrate(misfit_form, fields={"u": u, "u_ref": u_ref, "f": f}, values={"alpha": ALPHA}, domain=domain,
                          output=loss)
            wp.launch(gradient_step, dim=n, inputs=[theta, theta.grad, LR])
        tape.backward(loss=loss)
        print("loss %d %.9g" % (it, loss.numpy()[0]))
        if it == 0:
            g = theta.grad.numpy()
            print("grad theta [" + " ".join("%.9g" % g[p] for p in probe) + "]")
        tape.reset()


if __name__ == "__main__":
    main()
