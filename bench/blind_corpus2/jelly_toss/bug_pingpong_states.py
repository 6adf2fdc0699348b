# Jelly cube toss (newton, semi-implicit mass-spring soft body + ground contact).
#
# A 3x3x3 jelly cube made of particles and springs is thrown onto the ground.
# We optimise the launch velocity and the launch spin so that the cube's centre
# of mass comes to rest near a target mark on the floor.
#
#   python ok.py

import numpy as np
import warp as wp
import warp.optim

import newton


@wp.kernel
def apply_launch(
    v0: wp.array(dtype=wp.vec3),
    spin: wp.array(dtype=wp.vec3),
    center: wp.vec3,
    q: wp.array(dtype=wp.vec3),
    qd: wp.array(dtype=wp.vec3),
):
    tid = wp.tid()
    qd[tid] = v0[0] + wp.cross(spin[0], q[tid] - center)


@wp.kernel
def com_kernel(q: wp.array(dtype=wp.vec3), com: wp.array(dtype=wp.vec3)):
    tid = wp.tid()
    wp.atomic_add(com, 0, q[tid] / float(q.shape[0]))


@wp.kernel
def loss_kernel(com: wp.array(dtype=wp.vec3), target: wp.vec3, loss: wp.array(dtype=float)):
    delta = com[0] - target
    # horizontal miss distance plus a small penalty on the final height
    loss[0] = delta[0] * delta[0] + delta[1] * delta[1] + 0.1 * delta[2] * delta[2]


class Example:
    def __init__(self, verbose=False):
        self.fps = 60
        self.frame_dt = 1.0 / self.fps
        self.sim_substeps = 8
        self.sim_frames = 45
        self.sim_steps = self.sim_frames * self.sim_substeps
        self.sim_dt = self.frame_dt / self.sim_substeps
        self.verbose = verbose

        self.train_iter = 0
        self.target = wp.vec3(1.0, 0.45, 0.1)

        builder = newton.ModelBuilder(up_axis=newton.Axis.Z)
        self.build_jelly(builder, dim=3, spacing=0.1, height=0.4, mass=0.04)

        ke, kd, kf, mu = 2.0e3, 0.0, 20.0, 0.4
        builder.add_ground_plane(cfg=newton.ModelBuilder.ShapeConfig(ke=ke, kf=kf, kd=kd, mu=mu))

        # use `requires_grad=True` to create a model for differentiable simulation
        self.model = builder.finalize(requires_grad=True)
        self.model.soft_contact_ke = ke
        self.model.soft_contact_kd = kd
        self.model.soft_contact_kf = kf
        self.model.soft_contact_mu = mu
        # no particle-particle contact: it would corrupt the gradients
        self.model.particle_grid = None

        self.solver = newton.solvers.SolverSemiImplicit(self.model)

        self.states = [self.model.state() for _ in range(2)]
        self.control = self.model.control()

        # one-shot contacts are enough for a flat ground plane
        self.collision_pipeline = newton.CollisionPipeline(
            self.model, broad_phase="explicit", soft_contact_gap=10.0, requires_grad=True
        )
        self.contacts = self.collision_pipeline.contacts()
        self.collision_pipeline.collide(self.states[0], self.contacts)

        q0 = self.model.particle_q.numpy()
        self.center = wp.vec3(*q0.mean(axis=0).tolist())

        self.v0 = wp.array([wp.vec3(1.2, 0.2, 0.8)], dtype=wp.vec3, requires_grad=True)
        self.spin = wp.array([wp.vec3(2.0, -1.0, 0.5)], dtype=wp.vec3, requires_grad=True)
        self.com = wp.zeros(1, dtype=wp.vec3, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

        self.optimizer = warp.optim.Adam([self.v0, self.spin], lr=0.1)
        self.loss_history = []

    @staticmethod
    def build_jelly(builder, dim, spacing, height, mass):
        index = {}
        for i in range(dim):
            for j in range(dim):
                for k in range(dim):
                    pos = (i * spacing, j * spacing, height + k * spacing)
                    index[(i, j, k)] = builder.add_particle(pos, (0.0, 0.0, 0.0), mass, radius=0.02)
        cells = list(index)
        for a in range(len(cells)):
            for b in range(a + 1, len(cells)):
                d = np.linalg.norm(np.subtract(cells[a], cells[b]))
                if d < 1.8:  # edges, face and body diagonals
                    builder.add_spring(index[cells[a]], index[cells[b]], 300.0, 1.0, 0.0)

    def simulate(self, step):
        state_in = self.states[step % 2]
        state_out = self.states[(step + 1) % 2]
        state_in.clear_forces()
        self.solver.step(state_in, state_out, self.control, self.contacts, self.sim_dt)

    def forward(self):
        self.states[0].particle_q.assign(self.model.particle_q)
        wp.launch(
            apply_launch,
            dim=self.model.particle_count,
            inputs=[self.v0, self.spin, self.center, self.states[0].particle_q],
            outputs=[self.states[0].particle_qd],
        )
        for step in range(self.sim_steps):
            self.simulate(step)

        self.com.zero_()
        wp.launch(com_kernel, dim=self.model.particle_count, inputs=[self.states[self.sim_steps % 2].particle_q], outputs=[self.com])
        wp.launch(loss_kernel, dim=1, inputs=[self.com, self.target], outputs=[self.loss])
        return self.loss

    def forward_backward(self):
        self.tape = wp.Tape()
        with self.tape:
            self.forward()
        self.tape.backward(self.loss)

    def step(self):
        self.forward_backward()

        loss = self.loss.numpy()[0]
        print("loss %d %.9g" % (self.train_iter, loss))
        if self.train_iter == 0:
            print("grad v0", fmt(self.v0.grad.numpy()))
            print("grad spin", fmt(self.spin.grad.numpy()))
        if self.verbose:
            print("    com", self.com.numpy()[0], "v0", self.v0.numpy()[0])

        self.optimizer.step([self.v0.grad, self.spin.grad])

        # clear grads for next iteration
        self.tape.zero()

        self.loss_history.append(loss)
        self.train_iter += 1


def fmt(a):
    return "[" + ", ".join("%.9g" % x for x in np.asarray(a).ravel()) + "]"


def run(example, iterations):
    for _ in range(iterations):
        example.step()
    return example.loss_history


if __name__ == "__main__":
    wp.config.quiet = True
    with wp.ScopedDevice("cpu"):
        run(Example(), iterations=5)
