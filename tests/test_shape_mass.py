"""A shape's density gives its body the mass and inertia of the solid it describes.

Each shape's mass and inertia about its centre, from ``add_shape_*(density=...)``, against the solid's own: a
sphere, a box and a cylinder by their closed forms, and a capsule (the one shape whose solid is a composite) by
integrating its discs along the axis numerically (``scipy.integrate.quad``), a derivation independent of the
engine's. The model holds them in float32, so they agree to its rounding (relative 1e-6). Until the thirty-ninth
session a capsule's density gave only its cylinder's mass (at 1000 kg/m^3, 0.1257 kg against the capsule's 0.1592, 21 %
light) and inertia. Shapes with a density off the body's origin, which the engine takes as its centre of mass, are
refused unless balanced about it.
"""

import math

import numpy as np
import pytest
from scipy.integrate import quad

import softsnake

DENSITY = 1100.0  # [kg/m^3]
RADIUS, HALF_HEIGHT = 0.02, 0.05  # [m]


def disc_integrals(radius_at, z_from, z_to, density):
    """Mass and inertia (about the centre: transverse, axial) of a solid of revolution about z made of discs of
    radius ``radius_at(z)``: a disc of mass dm = rho pi r^2 dz adds dm r^2 / 2 about its axis and dm (r^2 / 4 + z^2)
    about a transverse axis through the origin."""
    def integral(f):
        return quad(lambda z: density * math.pi * radius_at(z) ** 2 * f(z, radius_at(z)), z_from, z_to,
                    epsabs=0.0, epsrel=1e-12, limit=200)[0]
    mass = integral(lambda z, r: 1.0)
    transverse = integral(lambda z, r: r * r / 4.0 + z * z)
    axial = integral(lambda z, r: r * r / 2.0)
    return mass, np.diag([transverse, transverse, axial])


def capsule_radius(z):
    """The capsule's radius at height z: the cylinder's between the sphere centres, the spheres' beyond."""
    beyond = abs(z) - HALF_HEIGHT
    return RADIUS if beyond <= 0.0 else math.sqrt(max(RADIUS * RADIUS - beyond * beyond, 0.0))


def expected(shape):
    r, h, rho = RADIUS, HALF_HEIGHT, DENSITY
    if shape == "sphere":
        mass = rho * 4.0 / 3.0 * math.pi * r ** 3
        return mass, np.eye(3) * 0.4 * mass * r * r
    if shape == "box":
        a, b, c = 0.05, 0.03, 0.02
        mass = rho * 8.0 * a * b * c
        return mass, np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) * mass / 3.0
    if shape == "cylinder":
        return disc_integrals(lambda z: r, -h, h, rho)
    quad_mass, quad_inertia = 0.0, np.zeros((3, 3))
    # Integrated piecewise (cylinder, then each cap) so that quadrature never straddles the kinks at +-h.
    for z_from, z_to in ((-h - r, -h), (-h, h), (h, h + r)):
        mass, inertia = disc_integrals(capsule_radius, z_from, z_to, rho)
        quad_mass, quad_inertia = quad_mass + mass, quad_inertia + inertia
    return quad_mass, quad_inertia


@pytest.mark.parametrize("shape", ["sphere", "box", "cylinder", "capsule"])
def test_shape_density_gives_the_solids_mass_and_inertia(shape):
    b = softsnake.ModelBuilder()
    body = b.add_body((0.0, 0.0, 1.0))
    if shape == "sphere":
        b.add_shape_sphere(body, RADIUS, density=DENSITY)
    elif shape == "box":
        b.add_shape_box(body, (0.05, 0.03, 0.02), density=DENSITY)
    elif shape == "cylinder":
        b.add_shape_cylinder(body, RADIUS, HALF_HEIGHT, density=DENSITY)
    else:
        b.add_shape_capsule(body, RADIUS, HALF_HEIGHT, density=DENSITY)
    model = b.finalize()
    mass, inertia = expected(shape)
    assert 1.0 / float(model.body_inv_mass.numpy()[0]) == pytest.approx(mass, rel=1e-6)
    np.testing.assert_allclose(model.body_inertia.numpy()[0], inertia, rtol=1e-6, atol=1e-6 * np.abs(inertia).max())


def test_capsule_is_a_cylinder_and_a_sphere():
    """The capsule's mass is its cylinder's plus a whole sphere's, the numbers of the module's docstring."""
    cylinder_mass = DENSITY * math.pi * RADIUS ** 2 * 2.0 * HALF_HEIGHT
    sphere_mass = DENSITY * 4.0 / 3.0 * math.pi * RADIUS ** 3
    assert expected("capsule")[0] == pytest.approx(cylinder_mass + sphere_mass, rel=1e-10)
    assert (cylinder_mass + sphere_mass) / DENSITY * 1000.0 == pytest.approx(0.1592, abs=1e-4)


def test_shapes_off_the_bodys_centre_of_mass_are_refused():
    """The engine takes a body's origin as its centre of mass (gravity acts there; it turns about it): a shape with a
    density off the origin, unbalanced, would put its mass where it is not, so finalize refuses it in one line naming
    where the shapes' mass is centred. Balanced about the origin (a dumbbell) it is a body, whose inertia takes each
    sphere's own and the parallel-axis term m d^2."""
    import softsnake

    b = softsnake.ModelBuilder()
    body = b.add_body((0.0, 0.0, 1.0))
    b.add_shape_sphere(body, RADIUS, position=(0.3, 0.0, 0.0), density=DENSITY)
    with pytest.raises(softsnake.ModelError, match=r"body 0: its shapes' mass is centred at \[0.3, 0.0, 0.0\] m"):
        b.finalize()
    b = softsnake.ModelBuilder()
    body = b.add_body((0.0, 0.0, 1.0))
    for x in (0.3, -0.3):
        b.add_shape_sphere(body, RADIUS, position=(x, 0.0, 0.0), density=DENSITY)
    model = b.finalize()
    sphere_mass, sphere_inertia = expected("sphere")
    inertia = model.body_inertia.numpy()[0]
    assert inertia[1, 1] == pytest.approx(2.0 * (sphere_inertia[1, 1] + sphere_mass * 0.09), rel=1e-6)
    assert inertia[0, 0] == pytest.approx(2.0 * sphere_inertia[0, 0], rel=1e-6)
