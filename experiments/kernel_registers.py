"""Registers per thread of softsnake's CUDA kernels, and how many threads of each a multiprocessor holds: no GPU
needed (Warp compiles the modules ahead of time for the chosen architecture with its own NVRTC).

A kernel whose threads take R registers fits floor(65 536 / (32 ceil(R / 8) 8 * block / 32)) blocks of ``block``
threads into one multiprocessor's register file (sm_80 and sm_90: 64 K registers, allocated per warp in units
of 256), at most 32 blocks and 2048 threads. That bounds the block solver (``cr_solve_block_per_world``, one
block per world): more worlds than the GPU holds at once run in waves (softsnake.linear_solve,
``whole_solve_threads``).

Reads the register count from the compiled cubin's ``.nv.info`` section (attribute EIATTR_REGCOUNT), and the
bytes of local memory a thread spills to from its ``.nv.local`` sections, with pyelftools.

    pip install -e ".[kernels]"  # pyelftools
    python experiments/kernel_registers.py [--arch 90] [--modules linear_solver,operator]
"""

import argparse
import importlib
import math
import struct
import sys
import tempfile
from pathlib import Path

import warp as wp

from softsnake.console import quiet_warp

EIATTR_REGCOUNT = 0x2F
"""The .nv.info attribute that holds a kernel's registers per thread: (symbol index, count), two 32-bit words."""
EIFMT_SVAL = 0x04
"""An .nv.info record with a 16-bit size and that many bytes of value; the other formats have fixed sizes."""
FIXED_RECORD_BYTES = {0x01: 2, 0x02: 3, 0x03: 4}
"""Bytes of an .nv.info record by format: no value (EIFMT_NVAL), a byte (BVAL), a 16-bit word (HVAL)."""
REGISTERS_PER_MULTIPROCESSOR = 65536
THREADS_PER_MULTIPROCESSOR = 2048
BLOCKS_PER_MULTIPROCESSOR = 32
BLOCK_SIZES = (128, 256, 512)


def register_counts(cubin):
    """{kernel name: (registers per thread, local bytes per thread)} of a cubin file."""
    from elftools.elf.elffile import ELFFile

    with open(cubin, "rb") as stream:
        elf = ELFFile(stream)
        symbols = elf.get_section_by_name(".symtab")
        counts = {}
        data = elf.get_section_by_name(".nv.info").data()
        k = 0
        while k < len(data):
            fmt, attribute = data[k], data[k + 1]
            if fmt != EIFMT_SVAL:
                k += FIXED_RECORD_BYTES.get(fmt, 2)
                continue
            (size,) = struct.unpack_from("<H", data, k + 2)
            if attribute == EIATTR_REGCOUNT:
                symbol, registers = struct.unpack_from("<II", data, k + 4)
                counts[symbols.get_symbol(symbol).name] = registers
            k += 4 + size
        local = {section.name.removeprefix(".nv.local."): section["sh_size"] for section in elf.iter_sections()
                 if section.name.startswith(".nv.local.")}
    return {name: (registers, local.get(name, 0)) for name, registers in counts.items()}


def resident_threads(registers, block):
    """Threads of a kernel of ``registers`` per thread in blocks of ``block`` that one multiprocessor holds."""
    per_warp = math.ceil(registers / 8) * 8 * 32
    blocks = REGISTERS_PER_MULTIPROCESSOR // (per_warp * (block // 32))
    blocks = min(blocks, BLOCKS_PER_MULTIPROCESSOR, THREADS_PER_MULTIPROCESSOR // block)
    return blocks * block


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", type=int, default=90, help="CUDA architecture (default: %(default)s, an H100)")
    parser.add_argument("--modules", default="linear_solver,operator,rows,multipliers",
                        help="softsnake.kernels modules, comma-separated (default: %(default)s)")
    args = parser.parse_args(argv)
    quiet_warp()
    wp.init()
    print(f"Warp {wp.__version__}, sm_{args.arch}; resident threads per multiprocessor at blocks of "
          + ", ".join(str(block) for block in BLOCK_SIZES))
    print(f"{'kernel':60s} {'registers':>9s} {'spilled B':>9s} " + " ".join(f"{block:>6d}" for block in BLOCK_SIZES))
    with tempfile.TemporaryDirectory() as folder:
        for name in args.modules.split(","):
            module = importlib.import_module(f"softsnake.kernels.{name}")
            for cubin in wp.compile_aot_module(module, arch=args.arch, module_dir=folder, use_ptx=False):
                for kernel, (registers, spilled) in sorted(register_counts(Path(cubin)).items()):
                    short = kernel.removesuffix("_cuda_kernel_forward").removesuffix("_cuda_kernel_backward")
                    short = f"{name}.{short.rsplit('_', 1)[0]}" + (" (backward)" if "backward" in kernel else "")
                    print(f"{short:60s} {registers:9d} {spilled:9d} "
                          + " ".join(f"{resident_threads(registers, block):6d}" for block in BLOCK_SIZES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
