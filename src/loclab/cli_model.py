"""``loclab model ...``: the predictions of :mod:`loclab.model` on the command line. Thin, as
the rest of the command line: parse, call the model, print its lines or its JSON."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from loclab.cli_args import Params, byte_size, c_options, function_target, positive_int
from loclab.errors import UsageError
from loclab.model.limits import DEFAULT_REUSE_ACCESSES, MAX_TRACE_ACCESSES


def add_model_commands(commands: Any) -> None:
    """The ``model`` command and its subcommands, on the top-level subparsers."""
    model = commands.add_parser(
        "model", help="predict: occupancy, coalescing, bank conflicts, caches, data reuse",
        description="Predict from a kernel's own description what limits it, as the "
        "lectures do before measuring.")
    models = model.add_subparsers(dest="model", metavar="MODEL", required=True)

    occupancy = models.add_parser(
        "occupancy", help="blocks and warps an SM holds, and what limits them",
        description="Active blocks and warps per SM of a kernel, the resource that limits "
        "them, and what to give up for the next step up (NVIDIA's allocation rules, as "
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor applies them).")
    occupancy.add_argument("--gpu", help="v100, a100, h100, ... or a compute capability "
                           "(sm_90, 8.6); default: the GPU at hand")
    occupancy.add_argument("--threads", required=True, metavar="N|XxYxZ",
                           help="threads a block (256, 32x8 or 8x8x4)")
    occupancy.add_argument("--regs", type=int, required=True, metavar="N",
                           help="registers a thread (nvcc -Xptxas -v, or ncu)")
    occupancy.add_argument("--smem", type=byte_size, default=0, metavar="BYTES",
                           help="shared memory a block, static + dynamic (0, 4096, 48K)")
    occupancy.add_argument("--carveout", type=int, metavar="PERCENT",
                           help="the kernel's preferred shared-memory carve-out "
                           "(default: the largest)")
    occupancy.add_argument("--json", action="store_true", help="print JSON")
    occupancy.set_defaults(handler=_occupancy)

    coalescing = models.add_parser(
        "coalescing", help="32-byte sectors and 128-byte lines a warp's global access moves",
        description="Sectors and lines per warp request of a global-memory access, and the "
        "share of the moved bytes the threads use, from the access as CUDA C text.")
    _access_options(coalescing, shape_help="the array's shape, for a subscript per "
                    "dimension (rows x cols, row-major); one subscript is already linear")
    coalescing.set_defaults(handler=_coalescing)

    banks = models.add_parser(
        "banks", help="shared-memory bank conflicts of a warp's access",
        description="The conflict degree of a __shared__ array access: the most distinct "
        "4-byte words one of the 32 banks serves in a warp's request.")
    _access_options(banks, shape_help="the __shared__ array's shape (32x33 for "
                    "tile[32][33]); at most a block's shared memory", shape_required=True)
    banks.add_argument("--gpu", help="v100, a100, h100, ... or a compute capability whose "
                       "shared memory a block bounds --shape (default: the most of any)")
    banks.set_defaults(handler=_banks)

    cache = models.add_parser(
        "cache", help="misses and bytes a loop nest moves through a cache hierarchy",
        description="Run the exact access trace of a Python or C loop nest at the given "
        "sizes through a set-associative LRU cache hierarchy (write-back, write-allocate): "
        "misses and bytes per level, and which array misses at the last level.")
    cache.add_argument("target", metavar="FILE::FUNCTION", type=function_target,
                       help="a .py or .c file; ::NAME picks the function (needed when the "
                       "file holds several)")
    cache.add_argument("--param", action=Params, help="a size parameter (at least 1), "
                       "repeatable (all needed)")
    cache.add_argument("--cache", metavar="SIZE[:WAYS],...",
                       help="the levels, nearest first (32KiB:8,1MiB:16; default: this "
                       "CPU's, from loclab devices)")
    cache.add_argument("--elem", action="append", default=[], metavar="BYTES|ARRAY=BYTES",
                       help="bytes an element (1, 2, 4, 8 or 16): all arrays (default 8, "
                       "float64), or one array (A=4), repeatable")
    cache.add_argument("--json", action="store_true", help="print JSON")
    c_options(cache)
    cache.set_defaults(handler=_cache)

    reuse = models.add_parser(
        "reuse", help="data reuse of naive, blocked and register-tiled MMM; the best tile",
        description="The data reuse factor (flops per element moved from the level below) of "
        "the lectures' matrix products, by formula and simulated, and the tile size that "
        "suits a cache, with the reasons (3 T^2 <= S and its refinements).")
    reuse.add_argument("kernel", choices=("mmm",), help="the computation (mmm)")
    reuse.add_argument("--n", type=positive_int, default=1024, help="matrix side, at least 4 "
                       "(default 1024)")
    reuse.add_argument("--cache", type=byte_size, default=32 * 1024, metavar="SIZE",
                       help="the cache (default 32KiB)")
    reuse.add_argument("--ways", type=positive_int, default=8, help="its ways (default 8)")
    reuse.add_argument("--line", type=positive_int, default=64, metavar="BYTES",
                       help="its line (default 64)")
    reuse.add_argument("--elem", type=positive_int, default=4, metavar="BYTES",
                       help="bytes an element: 1, 2, 4, 8 or 16 (default 4, float32)")
    reuse.add_argument("--tile", type=positive_int, help="a tile to evaluate instead of "
                       "choosing one (a multiple of 4, at most --n)")
    reuse.add_argument("--accesses", type=positive_int, default=DEFAULT_REUSE_ACCESSES,
                       metavar="N", help="simulate traces of at most N accesses each (a "
                       "corner of the matrices beyond that; default "
                       f"{DEFAULT_REUSE_ACCESSES:,}: seconds; at most {MAX_TRACE_ACCESSES:,})")
    reuse.add_argument("--json", action="store_true", help="print JSON")
    reuse.set_defaults(handler=_reuse)


def _access_options(command: argparse.ArgumentParser, shape_help: str,
                    shape_required: bool = False) -> None:
    command.add_argument("access", metavar="ACCESS",
                         help='the access as written in the kernel, e.g. '
                         '"a[(blockIdx.x*32 + threadIdx.y)*N + threadIdx.x]"')
    command.add_argument("--block", default="32x8", metavar="XxYxZ",
                         help="the block's shape (default: 32x8)")
    command.add_argument("--elem", type=int, default=4, metavar="BYTES",
                         help="bytes an element (4 float, 8 double, 16 float4; default 4)")
    command.add_argument("--shape", required=shape_required, metavar="AxB", help=shape_help)
    command.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                         help="a value for a size or loop variable (N=16384), or a block "
                         "index (blockIdx.x=3; default 0), repeatable")
    command.add_argument("--json", action="store_true", help="print JSON")


def _print(result: Any, as_json: bool) -> int:
    print(json.dumps(result.to_json(), indent=2) if as_json else "\n".join(result.lines()))
    return 0


def _gpu_at_hand() -> str:
    from loclab.hw.gpu import detect_gpu

    gpu, reason = detect_gpu()
    if gpu is None:
        raise UsageError(f"name a GPU with --gpu (v100, a100, h100, sm_86, ...): no GPU here "
                         f"({reason})")
    return gpu.compute_capability


def _block(option: str, text: str) -> tuple[int, int, int]:
    """A block shape by the one check every model uses (CUDA's limits: x and y at most
    1024, z at most 64, 1024 threads), refused in a line that names the option."""
    from loclab.model.text import parse_block

    try:
        return parse_block(text)
    except UsageError as err:
        raise UsageError(f"{option} {text}: {err}") from None


def _occupancy(args: argparse.Namespace) -> int:
    from loclab.model.occupancy import occupancy

    threads = math.prod(_block("--threads", args.threads))
    gpu = args.gpu if args.gpu is not None else _gpu_at_hand()
    # Shared memory beyond the static limit must be dynamic: counting all of it as dynamic
    # lets a block use what the GPU allows a kernel that opts in.
    return _print(occupancy(gpu, threads, args.regs,
                            dynamic_shared=args.smem, carveout_percent=args.carveout),
                  args.json)


def _access_arguments(args: argparse.Namespace) -> dict[str, Any]:
    from loclab.model.access import parse_params, parse_shape

    return {"block": _block("--block", args.block), "elem_bytes": args.elem,
            "params": parse_params(args.param),
            "shape": parse_shape(args.shape) if args.shape is not None else None}


def _coalescing(args: argparse.Namespace) -> int:
    from loclab.model.coalescing import coalescing

    return _print(coalescing(args.access, **_access_arguments(args)), args.json)


def _banks(args: argparse.Namespace) -> int:
    from loclab.model.banks import bank_conflicts, check_fits_shared_memory

    arguments = _access_arguments(args)
    check_fits_shared_memory(arguments["shape"], arguments["elem_bytes"], args.gpu)
    return _print(bank_conflicts(args.access, **arguments), args.json)


def _element_sizes(items: list[str]) -> int | dict[str, int]:
    """``--elem 4`` (every array) or ``--elem A=4 --elem B=8`` (8 for the others). Sizes
    are those of C's types, 1 to 16 bytes, powers of two: aligned to their size, such an
    element never straddles two cache lines, as the model's one line an access assumes."""
    from loclab.model.access import ELEM_BYTES

    sizes: dict[str, int] = {}
    every = None
    for item in items:
        name, sep, value = (part.strip() for part in item.rpartition("="))
        if (sep and not name) or not value.isdigit() or int(value) not in ELEM_BYTES:
            raise UsageError(f"--elem {item}: expected BYTES or ARRAY=BYTES (4, A=4), BYTES "
                             f"one of {', '.join(map(str, ELEM_BYTES))}")
        if (sizes.get(name) if name else every) is not None:
            raise UsageError(f"--elem {item}: {name or 'the size of every array'} given twice")
        if name:
            sizes[name] = int(value)
        else:
            every = int(value)
    every = 8 if every is None else every
    return {**dict.fromkeys(sizes, every), **sizes} if sizes else every


def _cache(args: argparse.Namespace) -> int:
    from loclab.model.cache import cache_report, detect_hierarchy, parse_cache_list
    from loclab.nest import load_file

    params = args.param
    elem_bytes = _element_sizes(args.elem)
    levels, notes = ((parse_cache_list(args.cache), []) if args.cache is not None
                     else detect_hierarchy())
    path, function = args.target
    nests = load_file(path, function, include_dirs=args.include_dirs,
                      defines=dict(args.defines))
    if len(nests) != 1:
        raise UsageError(f"{path} holds {len(nests)} functions: name one with ::NAME "
                         f"({', '.join(n.name for n in nests)})")
    report = cache_report(nests[0], params, levels, elem_bytes)
    report.note.extend(notes)
    return _print(report, args.json)


def _reuse(args: argparse.Namespace) -> int:
    from loclab.model.reuse import reuse_report

    return _print(reuse_report(args.kernel, args.n, args.cache, args.elem, args.line,
                               args.ways, tile=args.tile, max_accesses=args.accesses),
                  args.json)
