"""The snake parameter file: the shipped values, the accessors, and one-line errors for bad input."""

import math

import pytest

from softsnake.errors import ConfigError
from softsnake.robots.snake.config import (
    MAX_LINK_PARTICLES,
    MaterialConfig,
    ResolutionConfig,
    default_config_path,
    load_snake_config,
)

SHIPPED_TEXT = default_config_path().read_text()


def edited_config(tmp_path, table, key, value):
    """Write the shipped file with ``key = value`` in ``[table]`` (``value`` None drops the line)."""
    lines = SHIPPED_TEXT.splitlines()
    start = 0 if table is None else lines.index(next(line for line in lines if line.startswith(f"[{table}]"))) + 1
    for index in range(start, len(lines)):
        if lines[index].startswith("["):
            break
        if lines[index].split("=")[0].strip() == key:
            if value is None:
                del lines[index]
            else:
                lines[index] = f"{key} = {value}"
            path = tmp_path / "snake.toml"
            path.write_text("\n".join(lines) + "\n")
            return path
    raise AssertionError(f"no key {key} in [{table}] of the shipped file")


def expect_error(path, key, **kwargs):
    """Loading ``path`` must fail with one line naming the file and ``key``."""
    with pytest.raises(ConfigError) as info:
        load_snake_config(path, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert key in message
    return message


def test_shipped_file_holds_the_paper_values():
    config = load_snake_config()
    # Paper Sec. V: Ecoflex 00-30, Y = 66.243 kPa, nu = 0.4999; Sec. VI: mu = 1; 13 sections.
    assert config.material.young_modulus == 66243.0
    assert config.material.poisson_ratio == 0.4999
    assert config.friction == 1.0
    assert config.link_count == 4
    assert config.resolution("paper").section_count == 13


def test_rigid_body_and_hinge_counts_match_table_1():
    config = load_snake_config()
    # Table I: 15 rigid bodies (modules and wheels) and 10 rigid joints (one hinge per wheel).
    assert config.module_count + config.wheel_count == 15
    assert config.wheel_count == 10


def test_resolution_accessor():
    config = load_snake_config()
    assert config.resolution() is config.resolution("paper")
    coarse = config.resolution("coarse")
    assert coarse.section_count < config.resolution().section_count
    assert load_snake_config(resolution="coarse").resolution() == coarse
    with pytest.raises(ConfigError, match="unknown resolution 'fine'"):
        config.resolution("fine")


def test_unknown_resolution_at_load_names_file_and_key():
    message = expect_error(default_config_path(), "link.resolution", resolution="fine")
    assert "paper" in message and "coarse" in message


BAD_VALUES = [
    (None, "link_count", "0", "link_count"),
    (None, "link_count", "4.0", "link_count"),
    (None, "friction", "-1.0", "friction"),
    (None, "stiff_compliance", "true", "stiff_compliance"),
    (None, "damping_time", "nan", "damping_time"),
    ("material", "young_modulus", "0.0", "material.young_modulus"),
    ("material", "poisson_ratio", "0.5", "material.poisson_ratio"),
    ("material", "poisson_ratio", "-0.1", "material.poisson_ratio"),
    ("material", "density", "nan", "material.density"),
    ("link", "length", "-0.1", "link.length"),
    ("link", "outer_diameter", "inf", "link.outer_diameter"),
    ("link", "chamber_offset", "0.005", "link.chamber_offset"),
    ("link.resolution.paper", "section_count", "1", "link.resolution.paper.section_count"),
    ("link.resolution.paper", "section_count", "13.0", "link.resolution.paper.section_count"),
    ("link.resolution.paper", "outer_ring_points", "15", "link.resolution.paper.outer_ring_points"),
    ("link.resolution.coarse", "chamber_ring_points", "2", "link.resolution.coarse.chamber_ring_points"),
    ("link.resolution.coarse", "element_modulus_factor", "0", "link.resolution.coarse.element_modulus_factor"),
    ("link.resolution.coarse", "element_modulus_factor", '"soft"', "link.resolution.coarse.element_modulus_factor"),
    ("cap", "mass", "0", "cap.mass"),
    ("cap", "width", "0.02", "cap.width"),
    ("cap", "height", '"tall"', "cap.height"),
    ("cap", "height", "0.03", "cap.height: the module"),
    ("wheel", "radius", "0.01", "wheel.radius"),
    ("wheel", "mount_offset", "[0.0, 0.0, 0.0]", "wheel.mount_offset"),
    ("wheel", "mount_offset", "[0.0, 0.032]", "wheel.mount_offset"),
    ("wheel", "mount_offset", "[0.1, 0.032, 0.0]", "wheel.mount_offset"),
]


@pytest.mark.parametrize("table, key, value, named", BAD_VALUES)
def test_bad_value_is_one_line_naming_file_and_key(tmp_path, table, key, value, named):
    expect_error(edited_config(tmp_path, table, key, value), named)


def test_chambers_must_fit_inside_every_resolution(tmp_path):
    # 8.5 + 8 mm reaches past the coarse octagon's inscribed circle (17.5 cos(pi/8) = 16.17 mm)
    # but not the paper 16-gon's (17.16 mm): the message names the resolution.
    message = expect_error(edited_config(tmp_path, "link", "chamber_radius", "0.008"), "link.chamber_radius")
    assert "'coarse'" in message


def test_unknown_key(tmp_path):
    path = tmp_path / "snake.toml"
    path.write_text(SHIPPED_TEXT.replace("[cap]", "[cap]\ncolour = 1", 1))
    expect_error(path, "cap.colour: unknown key")


def test_missing_key(tmp_path):
    expect_error(edited_config(tmp_path, "wheel", "mass", None), "wheel.mass: missing key")


def test_missing_table(tmp_path):
    path = tmp_path / "snake.toml"
    path.write_text(SHIPPED_TEXT.replace("[link.resolution.coarse]", "[link.resolutions.coarse]", 1))
    expect_error(path, "link.resolutions")


def test_invalid_toml_and_missing_file(tmp_path):
    path = tmp_path / "snake.toml"
    path.write_text("link_count = = 4\n")
    expect_error(path, "not valid TOML")
    expect_error(tmp_path / "absent.toml", "cannot read")


def test_configs_made_in_code_are_validated():
    with pytest.raises(ConfigError, match="material.poisson_ratio"):
        MaterialConfig(young_modulus=66243.0, poisson_ratio=0.5, density=1070.0)
    with pytest.raises(ConfigError, match="material.density"):
        MaterialConfig(young_modulus=66243.0, poisson_ratio=0.4, density=math.nan)
    with pytest.raises(ConfigError, match="link.resolution.x.chamber_ring_points"):
        ResolutionConfig(name="x", section_count=13, outer_ring_points=16, chamber_ring_points=5)


def test_element_modulus_factor_is_a_coarse_calibration_only():
    # The paper mesh is the reference (factor 1, key left out); the coarse mesh carries the
    # calibration documented in snake.toml (tests/robots/snake/test_calibration.py measures it).
    config = load_snake_config()
    assert config.resolution("paper").element_modulus_factor == 1.0
    assert 0.0 < config.resolution("coarse").element_modulus_factor < 1.0
    assert "element_modulus_factor" not in SHIPPED_TEXT.split("[link.resolution.paper]")[1].split("[")[0]


def test_element_modulus_factor_scales_only_the_tetrahedra():
    import dataclasses

    from softsnake.builder import ModelBuilder
    from softsnake.robots.snake.robot import add_soft_link

    config = load_snake_config(resolution="coarse")
    unscaled = dataclasses.replace(config.resolution("coarse"), element_modulus_factor=1.0)
    built = []
    for resolution in (config.resolution("coarse"), unscaled):
        builder = ModelBuilder()
        add_soft_link(builder, config, resolution, position=(0.0, 0.0, 0.0), rotation=(0.0, 0.0, 0.0, 1.0))
        built.append(builder)
    scaled, plain = (b.finalize() for b in built)
    factor = config.resolution("coarse").element_modulus_factor
    # The tetrahedra's modulus is scaled; the distance rows (the actuation rows included) keep theirs.
    assert scaled.tet_youngs_modulus.numpy() == pytest.approx(factor * plain.tet_youngs_modulus.numpy(), rel=1e-6)
    for name in ("distance_compliance", "distance_youngs_modulus", "distance_rest_length"):
        assert (getattr(scaled, name).numpy() == getattr(plain, name).numpy()).all(), name


def test_binary_file_is_one_line(tmp_path):
    path = tmp_path / "snake.toml"
    path.write_bytes(b"\xff\xfe\x00\x81 link_count = 4\n\x9c")
    expect_error(path, "not a text file (TOML must be UTF-8)")


def test_huge_mesh_is_refused_at_once_with_an_estimate(tmp_path):
    """section_count = 5000 used to mesh for minutes without a word; now the loader refuses it with the
    particle count, an estimate of the memory and time, and the limit."""
    path = edited_config(tmp_path, "link.resolution.paper", "section_count", "5000")
    message = expect_error(path, "link.resolution.paper: 5000 sections of 28 points make 140000 particles per link")
    assert f"limit of {MAX_LINK_PARTICLES}" in message and "GB of arrays" in message and "s per frame" in message
    # The largest mesh within the limit loads.
    largest = MAX_LINK_PARTICLES // 28
    assert load_snake_config(edited_config(tmp_path, "link.resolution.paper", "section_count", str(largest)))
