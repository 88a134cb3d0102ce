"""Proof by execution for C: both files compiled with the system's compiler, run side by side.

The original file and the emitted one are each compiled into a shared library (``cc -O1
-ffp-contract=off``, so that no multiply-add is fused differently in the two, with
``-fopenmp`` when the compiler has it; the original file's directory and ``-I``/``-D`` as
given) and called through ctypes on the same inputs. Arguments follow the function's
declaration: an array parameter gets a NumPy array of its element type, shaped as declared
(``float A[M][K]``) or, for a pointer, as long as the largest subscript read through it; an
integer parameter that is a size gets the chosen size; other scalars random values. Outputs
are compared as for Python (:mod:`loclab.transform.verify`).
"""

from __future__ import annotations

import ctypes
import math
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from loclab.errors import UsageError
from loclab.transform.inputs import (SEED, access_shapes, check_footprint, check_work,
                                     choose_sizes, index_bounds)
from loclab.transform.verify import (MAX_COMPILED_INSTANCES, Verification, VerificationError,
                                     compare_outputs, printing_to_stderr, reordered_length)

if TYPE_CHECKING:
    from loclab.transform import Transformed

C_TYPES = {"float": (np.float32, ctypes.c_float), "double": (np.float64, ctypes.c_double),
           "int": (np.int32, ctypes.c_int), "long": (np.int64, ctypes.c_long),
           "unsigned": (np.uint32, ctypes.c_uint), "char": (np.int8, ctypes.c_char),
           "short": (np.int16, ctypes.c_short), "size_t": (np.uint64, ctypes.c_size_t),
           "int32_t": (np.int32, ctypes.c_int32), "int64_t": (np.int64, ctypes.c_int64),
           "uint32_t": (np.uint32, ctypes.c_uint32), "uint64_t": (np.uint64, ctypes.c_uint64)}


def verify_c(result: "Transformed", sizes: dict[str, int]) -> Verification:
    from loclab.deps.model import Model

    program = result.program
    variables = {v.name: v for v in program.nest.variables if v.is_argument}

    def too_small(candidate: dict[str, int]) -> str | None:
        """An array declared smaller than the loops reach at these sizes."""
        shapes = access_shapes(program, Model(program.nest, candidate),
                               max(candidate.values(), default=8))
        for variable in variables.values():
            declared = _declared(variable, candidate)
            reached = shapes.get(variable.key)
            if declared and reached and len(declared) == len(reached) and any(
                    r > d for r, d in zip(reached, declared)):
                return (f"{variable.name} is declared {' x '.join(map(str, declared))} but "
                        f"the loops reach {' x '.join(map(str, reached))}")
        return None

    chosen = choose_sizes(program, sizes, lambda candidate: too_small(candidate) is None)
    problem = too_small(chosen)
    if problem is not None:
        shown = ", ".join(f"{k}={v}" for k, v in chosen.items())
        raise UsageError(f"--verify at {shown}: {problem}: give sizes with --param")
    parameters = _parameters(program.syntax.function)
    missing = [p for p in chosen if p not in {name for name, _, _ in parameters}]
    if missing:
        raise UsageError(f"--verify: the size {missing[0]} is not a parameter of "
                         f"{result.name}; define it with -D {missing[0]}=VALUE")
    check_work(program, chosen, MAX_COMPILED_INSTANCES, "compiled")
    arguments = _arguments(program, parameters, chosen)
    with tempfile.TemporaryDirectory(prefix="loclab-verify-") as scratch:
        origin = result.origin
        flags = _flags(origin)
        before = _library(origin.source, origin.filename, result.name, scratch, "original",
                          flags)
        after = _library(result.source, origin.filename, result.name, scratch, "transformed",
                         flags)
        expected = {k: v.copy() if isinstance(v, np.ndarray) else v
                    for k, v in arguments.items()}
        actual = {k: v.copy() if isinstance(v, np.ndarray) else v
                  for k, v in arguments.items()}
        returns = _return_type(program.syntax.function)
        with printing_to_stderr():
            expected_value = _call(before, parameters, expected, returns)
            actual_value = _call(after, parameters, actual, returns)
    length = reordered_length(program, chosen)
    compared = [compare_outputs(name, expected[name], actual[name], length)
                for name, _, pointer in parameters if pointer]
    if returns is not None:
        dtype = np.float32 if returns is ctypes.c_float else np.float64
        compared.append(compare_outputs("return value", np.asarray(expected_value, dtype),
                                        np.asarray(actual_value, dtype), length))
    return Verification(chosen, tuple(compared))


def _arguments(program: Any, parameters: list[tuple[str, str, bool]],
               sizes: dict[str, int]) -> dict[str, Any]:
    """The C function's arguments at ``sizes``: an array parameter a NumPy array of its
    element type, shaped as declared or as far as the loops reach (an index array's values
    below the extent it indexes), a size the size, other scalars random values."""
    from loclab.deps.model import Model

    variables = {v.name: v for v in program.nest.variables if v.is_argument}
    largest = max(sizes.values(), default=8)
    reached = access_shapes(program, Model(program.nest, sizes), largest)
    shapes = {name: _declared(variables.get(name), sizes) or reached.get(
        variables[name].key if name in variables else name, (largest,))
        for name, _, pointer in parameters if pointer}
    dtypes = {name: _c_type(kind, name)[0] for name, kind, pointer in parameters if pointer}
    check_footprint(sum(math.prod(shape) * np.dtype(dtypes[name]).itemsize
                        for name, shape in shapes.items()), sizes, copies=3)
    bounds = index_bounds(program, {variables[name].key: shape
                                    for name, shape in shapes.items() if name in variables})
    rng = np.random.default_rng(SEED)
    arguments: dict[str, Any] = {}
    for name, kind, pointer in parameters:
        dtype, _ = _c_type(kind, name)
        if pointer and np.issubdtype(dtype, np.integer):
            top = bounds.get(name, largest)
            arguments[name] = rng.integers(0, max(1, top), size=shapes[name]).astype(dtype)
        elif pointer:
            arguments[name] = rng.uniform(0.5, 1.5, size=shapes[name]).astype(dtype)
        elif name in sizes:
            arguments[name] = sizes[name]
        elif np.issubdtype(dtype, np.integer):
            arguments[name] = int(rng.integers(1, 8))
        else:
            arguments[name] = float(rng.uniform(0.5, 1.5))
    return arguments


def _return_type(function: Any) -> Any:
    """The ctypes type of a function's scalar result (None for void)."""
    from pycparser import c_ast

    kind = function.decl.type.type
    if not isinstance(kind, c_ast.TypeDecl):
        return None
    names = [n for n in getattr(kind.type, "names", []) if n not in {"const", "static"}]
    if names in (["void"], []):
        return None
    return _c_type(" ".join(names), "the result")[1]


def _parameters(function: Any) -> list[tuple[str, str, bool]]:
    """(name, base type, whether it is an array or pointer) of each parameter."""
    from pycparser import c_ast

    out: list[tuple[str, str, bool]] = []
    args = function.decl.type.args
    for parameter in (args.params if args else []):
        if not isinstance(parameter, c_ast.Decl):
            continue
        kind = parameter.type
        pointer = False
        while not isinstance(kind, c_ast.TypeDecl):
            pointer = pointer or isinstance(kind, (c_ast.PtrDecl, c_ast.ArrayDecl))
            kind = kind.type
        names = [n for n in getattr(kind.type, "names", []) if n not in {"const", "signed"}]
        out.append((parameter.name, " ".join(names) or "int", pointer))
    return out


def _c_type(kind: str, name: str) -> tuple[Any, Any]:
    words = kind.split()
    key = "long" if "long" in words else "unsigned" if words[:1] == ["unsigned"] \
        else words[-1] if words else "int"
    if key not in C_TYPES:
        raise UsageError(f"--verify: parameter {name} has type {kind}, which loclab cannot "
                         "make inputs for")
    return C_TYPES[key]


def _declared(variable: Any, sizes: dict[str, int]) -> tuple[int, ...] | None:
    """The declared shape of an array parameter (``float A[M][K]``) at these sizes."""
    from loclab.nest.expr import Poly

    if variable is None or variable.extents is None or any(e is None for e in
                                                            variable.extents):
        return None
    values = {k: Poly.const(v) for k, v in sizes.items()}
    shape = [e.substitute(values).constant_value() for e in variable.extents]
    return None if any(v is None for v in shape) else tuple(max(1, v) for v in shape)


def _flags(origin: Any) -> list[str]:
    flags = [f"-I{Path(origin.filename).resolve().parent}"]
    flags += [f"-I{directory}" for directory in origin.include_dirs]
    flags += [f"-D{name}={value}" for name, value in origin.defines.items()]
    return flags


def _library(source: str, filename: str, function: str, scratch: str, label: str,
             flags: list[str]) -> Any:
    """Compile a C file (with an exported pointer to the function, static or not) and load
    it; returns the function."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        raise UsageError("--verify: no C compiler (cc, gcc or clang) on the PATH")
    path = Path(scratch) / f"{label}.c"
    path.write_text(source + f"\nvoid *loclab_entry = (void *) &{function};\n")
    library = Path(scratch) / f"{label}.so"
    command = [compiler, "-std=gnu11", "-O1", "-ffp-contract=off", "-fPIC", "-shared",
               *flags, str(path), "-o", str(library), "-lm"]
    openmp = subprocess.run(command[:1] + ["-fopenmp"] + command[1:], capture_output=True,
                            text=True)
    if openmp.returncode != 0:
        plain = subprocess.run(command, capture_output=True, text=True)
        if plain.returncode != 0:
            first = (plain.stderr.strip().splitlines() or ["no message"])[0]
            raise VerificationError(f"--verify: the {label} file does not compile: {first}")
    try:  # lazily: functions the file calls but never defines (main's helpers) stay unbound
        loaded = ctypes.CDLL(str(library), mode=os.RTLD_LAZY | os.RTLD_LOCAL)
    except OSError as err:
        raise VerificationError(f"--verify: cannot load the compiled {label} file: "
                                f"{err}") from None
    return ctypes.c_void_p.in_dll(loaded, "loclab_entry").value


def _call(address: Any, parameters: list[tuple[str, str, bool]],
          arguments: dict[str, Any], returns: Any) -> Any:
    types: list[Any] = []
    values: list[Any] = []
    for name, kind, pointer in parameters:
        if pointer:
            types.append(ctypes.c_void_p)
            values.append(arguments[name].ctypes.data)
        else:
            _, c_type = _c_type(kind, name)
            types.append(c_type)
            values.append(arguments[name])
    return ctypes.CFUNCTYPE(returns, *types)(address)(*values)
