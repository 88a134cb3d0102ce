"""``loclab transform``: the lectures' recipes as checked, executable loop transformations.

``transform(func_or_source, "tile(i=32, j=32); parallel(ii)")`` applies the steps one by
one to the function's loop nest; code passes the steps themselves
(``[make_step("tile", keywords=[("i", 32), ("j", 32)]), make_step("parallel", "ii")]``,
:mod:`loclab.transform.recipe`), so that recipe text is read only where a user wrote it. Each step rearranges the loops around the original
statements (:mod:`loclab.transform.tree`), is checked exactly against the function's
dependences with isl (:mod:`loclab.transform.legality`), and the result is emitted as code
through isl's AST generator: Python, Numba or C. A refused step raises
:class:`~loclab.transform.steps.IllegalStep` naming the dependence it would break.

The result is a :class:`Transformed`: ``.source``, ``.steps`` (each with why it is legal),
``.compile()`` (a callable, a drop-in replacement), ``.verify(**sizes)`` (runs both
versions on the same random inputs and compares every output) and ``.analyze()`` (the new
nest's dependence analysis, like any nest's).
"""

from __future__ import annotations

import inspect
import sys
import textwrap
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loclab.errors import UsageError
from loclab.transform.recipe import Step, make_step

EMITTERS = {"python": ("python", "numba", "cuda"), "c": ("c",)}
AFTER_COPIES = {"parallel", "stage", "copy", "privatize", "vectorize", "fastmath", "hold",
                "grid", "block"}  # steps that move no loop
NUMBA_ONLY_STEPS = {"fastmath"}  # steps only the Numba emitter writes (C, CUDA: flags)
GPU_STEPS = {"grid", "block"}  # steps that map loops onto a CUDA kernel's blocks and threads
HOST_ONLY_STEPS = {"fuse", "skew"}  # steps whose loops the CUDA emitter does not take


@dataclass(frozen=True)
class StepResult:
    """One step of a recipe: legal (why), as the checker proved it."""

    step: str
    legal: bool
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "legal": self.legal, "reason": self.reason}


@dataclass(eq=False)
class Transformed:
    """A transformed function: its source, the steps and why each is legal."""

    name: str
    language: str
    emit: str
    source: str
    steps: list[StepResult]
    program: Any = field(repr=False)
    origin: Any = field(repr=False)  # where the original came from (for compile and verify)
    notes: list[str] = field(default_factory=list)
    # arrays that may share memory, checked first by the code (loclab.transform.versioning)
    overlaps: list[tuple[str, str]] = field(default_factory=list)
    scalar_types: dict[str, str] = field(default_factory=dict, repr=False)

    def compile(self) -> Callable[..., Any]:
        """The transformed function, ready to call (Numba compiles it on the first call)."""
        from loclab.transform.verify import compile_transformed

        return compile_transformed(self)

    def verify(self, **sizes: int) -> "Any":
        """Run the original and this on the same random inputs and compare every output."""
        from loclab.transform.verify import verify

        return verify(self, sizes)

    def analyze(self) -> Any:
        """The dependence analysis of the transformed loops, like any nest's: where the code
        checks arguments for shared memory first, of the loops it runs when they are
        apart (analyzed as apart)."""
        from loclab.deps import analyze
        from loclab.transform.emit import emit_code

        origin = self.origin
        if self.language == "c":
            return analyze(self.source, self.name.split(".")[-1], language="c",
                           filename=origin.filename, include_dirs=origin.include_dirs,
                           defines=origin.defines)
        if not self.overlaps:
            return analyze(self.source, self.name.split(".")[-1], filename=origin.filename)
        apart = emit_code(self.program, self.emit, self.scalar_types)
        return analyze(apart, self.name.split(".")[-1], filename=origin.filename,
                       assume_distinct=True)

    def to_json(self) -> dict[str, Any]:
        return {"function": self.name, "language": self.language, "emit": self.emit,
                "steps": [s.to_json() for s in self.steps], "source": self.source,
                "notes": list(self.notes)}


@dataclass(frozen=True)
class Origin:
    """The original function: its file's text, name and where its lines start."""

    source: str
    filename: str
    function: str
    offset: int
    module: dict[str, Any] | None  # a live function's globals
    include_dirs: tuple[str, ...] = ()  # C: -I
    defines: dict[str, str] = field(default_factory=dict)  # C: -D


def transform(func_or_source: Callable[..., Any] | str, recipe: str | Sequence[Step],
              function: str | None = None, *, emit: str | None = None,
              filename: str | None = None, language: str = "python",
              empty: bool = False, scalar_types: Mapping[str, str] | None = None,
              assume_distinct: bool = False,
              dtypes: Mapping[str, str] | None = None) -> Transformed:
    """Apply a recipe (text, or a list of steps) to a live Python function or to the source
    text of one; ``empty`` accepts a recipe text of no steps (an empty list always is: the
    function as written, emitted as ``emit``);
    ``scalar_types`` gives the NumPy type of scalars an ``expand`` turns into arrays (as
    Numba types them for the arguments the code is for; default: float64, or int64 for a
    scalar used in a subscript). Steps are proved for distinct arrays: arguments that may
    share memory are checked by the emitted code when it starts (it runs as written when
    they do; C whose span loclab cannot bound is an error; CUDA refuses to run), unless
    ``assume_distinct``. ``dtypes``: for ``emit="cuda"``, the element type of arrays (by
    name) the kernels are written for (default: float32, int64 for index arrays)."""
    from loclab.nest.deep import on_deep_stack

    where = filename or getattr(func_or_source, "__name__", None) or "<source>"
    return on_deep_stack(where, lambda: _run(_origin(func_or_source, function, filename,
                                                     language),
                                             recipe, emit, language, empty, scalar_types,
                                             assume_distinct, dtypes))


def transform_file(path: str | Path, function: str | None, recipe: str | Sequence[Step], *,
                   emit: str | None = None, include_dirs: Iterable[str | Path] = (),
                   defines: Mapping[str, str] | None = None,
                   assume_distinct: bool = False,
                   dtypes: Mapping[str, str] | None = None) -> Transformed:
    """Apply a recipe to the function ``function`` of a .py or .c file (``None``: its only
    function); C is preprocessed with ``include_dirs`` and ``defines`` (``-I``, ``-D``);
    ``assume_distinct`` and ``dtypes`` as for :func:`transform`."""
    from loclab.nest.deep import on_deep_stack

    return on_deep_stack(str(path), lambda: _transform_file(Path(path), function, recipe,
                                                            emit, include_dirs, defines,
                                                            assume_distinct, dtypes))


def _transform_file(path: Path, function: str | None, recipe: str | Sequence[Step],
                    emit: str | None,
                    include_dirs: Iterable[str | Path],
                    defines: Mapping[str, str] | None, assume_distinct: bool,
                    dtypes: Mapping[str, str] | None = None) -> Transformed:
    from loclab.nest import C_SUFFIXES, read_source

    source = read_source(path)
    language = "c" if path.suffix in C_SUFFIXES else "python"
    if language == "python" and (list(include_dirs) or defines):
        raise UsageError(f"{path}: -I and -D apply to C files only")
    if function is None:
        function = _only_function(source, str(path), language, include_dirs, defines)
    origin = Origin(source, str(path), function, 0, None, tuple(map(str, include_dirs)),
                    dict(defines or {}))
    return _run(origin, recipe, emit, language, assume_distinct=assume_distinct,
                dtypes=dtypes)


def _origin(func_or_source: Callable[..., Any] | str, function: str | None,
            filename: str | None, language: str) -> Origin:
    if isinstance(func_or_source, str):
        if function is None:
            function = _only_function(func_or_source, filename or "<source>", language)
        return Origin(func_or_source, filename or "<source>", function, 0, None)
    target = inspect.unwrap(func_or_source)
    target = getattr(target, "py_func", target)
    try:
        lines, start = inspect.getsourcelines(target)
        where = inspect.getsourcefile(target) or "<function>"
    except (OSError, TypeError) as err:
        raise UsageError(f"cannot read the source of {func_or_source!r}: {err}") from None
    return Origin(textwrap.dedent("".join(lines)), where, target.__name__, start - 1,
                  getattr(target, "__globals__", None))


def _only_function(source: str, filename: str, language: str,
                   include_dirs: Iterable[str | Path] = (),
                   defines: Mapping[str, str] | None = None) -> str:
    """The name of the one function of a file (a C file's own, not its headers'), as
    ``analyze`` reads it; several are an error listing them."""
    if language == "python":
        from loclab.nest.python import python_functions

        names = [name for name, _ in python_functions(source, filename)]
    else:
        from loclab.nest.cunit import parse_c

        unit = parse_c(source, filename, include_dirs, defines)
        names = [node.decl.name for node in unit.own_functions()]
    if len(names) != 1:
        raise UsageError(f"{filename}: name the function to transform with ::NAME "
                         f"(functions: {', '.join(names) or 'none'})")
    return names[0]


def _run(origin: Origin, recipe: str | Sequence[Step], emit: str | None, language: str,
         empty: bool = False, scalar_types: Mapping[str, str] | None = None,
         assume_distinct: bool = False,
         dtypes: Mapping[str, str] | None = None) -> Transformed:
    from loclab.deps.overlap import may_overlap
    from loclab.deps.remedies import Remedies
    from loclab.transform.emit import emit_code
    from loclab.transform.legality import Dependences
    from loclab.transform.output import header
    from loclab.transform.prefixes import PREFIXES, State
    from loclab.transform.recipe import parse_recipe
    from loclab.transform.steps import Context, registry

    emit = emit or language
    if emit not in EMITTERS[language]:
        choices = " or ".join(EMITTERS[language])
        raise UsageError(f"--emit {emit}: a {language} function is emitted as {choices}")
    if isinstance(recipe, str):
        steps = parse_recipe(recipe) if recipe.strip() or not empty else []
    else:
        steps = list(recipe)
    known = registry()
    for step in steps:
        if step.name not in known:
            raise UsageError(f"{step}: unknown step {step.name!r} (steps: "
                             f"{', '.join(sorted(known))})")
    gpu = next((step for step in steps if step.name in GPU_STEPS), None)
    if gpu is not None and emit != "cuda":
        raise UsageError(f"{gpu}: grid and block map loops onto a GPU: emit cuda")
    numba_only = next((step for step in steps if step.name in NUMBA_ONLY_STEPS), None)
    if numba_only is not None and emit != "numba":
        raise UsageError(f"{numba_only}: only Numba's emitter writes it (--emit numba); a C "
                         "or CUDA compiler takes it from the command line "
                         "(-ffp-contract=fast -fassociative-math; NVCC fuses by default)")
    shaped = next((step for step in steps if step.name in HOST_ONLY_STEPS), None)
    if shaped is not None and emit == "cuda":  # its kernels' guards were never run on a GPU
        raise UsageError(f"{shaped}: the CUDA emitter takes no fused or skewed loops yet: "
                         "emit python, numba or c")
    function = (origin.source, origin.filename, origin.function, origin.offset, language,
                origin.include_dirs, tuple(sorted(origin.defines.items())))
    texts = tuple(str(step) for step in steps)
    done, state = PREFIXES.longest(function, texts)
    if state is None:
        program = _program(origin, language)
        context = Context(Dependences(program.model), Remedies(program.model))
        results: list[StepResult] = []
        copied: str | None = None
        mapped: str | None = None
    else:
        program, context, results = state.program, state.context, list(state.results)
        copied, mapped = state.copied, state.mapped
    for number, step in enumerate(steps[done:], done + 1):
        if copied is not None and step.name not in AFTER_COPIES:
            raise UsageError(f"{step}: loops cannot move once {copied} copies a slice for "
                             "them: reorder loops first")
        if mapped is not None and step.name not in GPU_STEPS:
            raise UsageError(f"{step}: after {mapped} only grid and block steps may follow: "
                             "map the loops last")
        if step.name in ("stage", "copy"):
            copied = str(step)
        if step.name in GPU_STEPS:
            mapped = mapped or str(step)
        applied = known[step.name].apply(program, step, context)
        program = applied.program
        results.append(StepResult(str(step), True, applied.reason))
        PREFIXES.keep(function, texts[:number],
                      State(program, context, tuple(results), copied, mapped))
    recipe_text = "; ".join(r.step for r in results)
    overlaps = [] if assume_distinct or not results else may_overlap(program.nest)
    as_written = _program(origin, language) if overlaps and language == "c" else None
    source = header(emit, f"{Path(origin.filename).name}::{origin.function}",
                    recipe_text or "no step (as written)") \
        + "\n" + emit_code(program, emit, scalar_types, overlaps, as_written, dtypes)
    notes = list(program.notes)
    overlaps_named = [(a.name, b.name) for a, b in overlaps]
    if overlaps:
        pairs = ", ".join(f"{a} and {b}" for a, b in overlaps_named)
        then = ("refuses to run" if emit == "cuda" else "runs as written")
        notes.append(f"{pairs} may share memory: the function checks them first and {then} "
                     "when they do (--assume-distinct leaves the check out)")
    return Transformed(program.nest.name, language, emit, source, results, program, origin,
                       notes, overlaps_named, dict(scalar_types or {}))


def _program(origin: Origin, language: str) -> Any:
    from loclab.transform.tree import Private

    if language == "python":
        from loclab.transform.python_program import python_program

        program = python_program(origin.source, origin.filename, origin.function,
                                 origin.offset)
    else:
        from loclab.transform.c_program import c_program

        program = c_program(origin.source, origin.filename, origin.function,
                            origin.include_dirs, origin.defines)
    for loop in program.nest.loops:
        if loop.stride is not None:
            raise UsageError(f"{loop.file}:{loop.line}: loop {loop.var} steps by {loop.stride}, "
                             "a size: loclab transforms loops of a constant step only "
                             "(loclab analyze explains this one)")
    for variable in program.nest.variables:
        if variable.scope:
            program.private[variable.key] = Private(variable, variable.scope[-1], "local")
    return program


class _CallableModule(types.ModuleType):
    """``loclab.transform(...)`` calls :func:`transform`: the package is the API's verb, as
    ``loclab.run`` and ``loclab.analyze`` are."""

    def __call__(self, *args: Any, **kwargs: Any) -> Transformed:
        return transform(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["Step", "StepResult", "Transformed", "make_step", "transform", "transform_file"]
