"""The GPU code paths compile: every kernel module of softsnake.kernels builds for CUDA (PTX for sm_90, the
H100/H200 generation) through Warp's bundled NVRTC, on a machine without a GPU. The same kernels run on the
CPU in every other test; with a GPU, SOFTSNAKE_TEST_DEVICES=cpu,cuda runs those tests on both devices."""

import importlib

import pytest
import warp as wp

wp.config.quiet = True

KERNEL_MODULES = ("angular_spring", "attachment", "checks", "contact", "distance", "hinge", "integration",
                  "linear_solver", "prismatic", "rows", "tetrahedron")


@pytest.mark.parametrize("name", KERNEL_MODULES)
def test_kernel_module_compiles_for_cuda(name, tmp_path):
    module = importlib.import_module(f"softsnake.kernels.{name}")
    try:
        wp.compile_aot_module(module, arch=90, module_dir=str(tmp_path), use_ptx=True)
    except Exception as error:
        if "nvrtc" in str(error).lower() or "cuda toolkit" in str(error).lower():
            pytest.skip(f"no CUDA compiler in this Warp build: {error}")
        raise
    assert any(path.suffix == ".ptx" for path in tmp_path.iterdir())
