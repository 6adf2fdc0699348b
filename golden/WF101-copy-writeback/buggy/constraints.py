"""Contact projection: keep every particle above the floor plane y = 0."""

import warp as wp


@wp.kernel
def floor_contact(q: wp.array(dtype=wp.vec3), q_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    p = q[i]
    q_out[i] = wp.vec3(p[0], wp.max(p[1], 0.0), p[2])


def project_floor(state, q_pred):
    """Project the predicted positions onto the feasible set and store them in the state."""
    q_proj = wp.empty_like(q_pred)
    wp.launch(floor_contact, dim=q_pred.shape[0], inputs=[q_pred], outputs=[q_proj])
    wp.copy(state.q, q_proj)
