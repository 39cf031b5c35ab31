"""The GPU code paths compile: every kernel module of softsnake.kernels and softsnake.constraints builds for CUDA (PTX for sm_90, the
H100/H200 generation) through Warp's bundled NVRTC, on a machine without a GPU. The same kernels run on the
CPU in every other test; with a GPU, SOFTSNAKE_TEST_DEVICES=cpu,cuda runs those tests on both devices."""

import importlib
import pkgutil

import pytest
import warp as wp

import softsnake.constraints
import softsnake.kernels


def kernel_modules():
    """Every module of the two kernel packages that defines a Warp kernel."""
    names = (f"{package.__name__}.{info.name}" for package in (softsnake.kernels, softsnake.constraints)
             for info in pkgutil.iter_modules(package.__path__))
    return sorted(name for name in names
                  if any(isinstance(value, wp.Kernel) for value in vars(importlib.import_module(name)).values()))


KERNEL_MODULES = kernel_modules()


@pytest.mark.parametrize("name", KERNEL_MODULES)
def test_kernel_module_compiles_for_cuda(name, tmp_path):
    module = importlib.import_module(name)
    try:
        wp.compile_aot_module(module, arch=90, module_dir=str(tmp_path), use_ptx=True)
    except Exception as error:
        if "nvrtc" in str(error).lower() or "cuda toolkit" in str(error).lower():
            pytest.skip(f"no CUDA compiler in this Warp build: {error}")
        raise
    assert any(path.suffix == ".ptx" for path in tmp_path.iterdir())
