"""The command line. Thin: parse, call the API, print. Errors are one line, never a traceback.

Exit codes: 0 success, 1 a variant failed (validation or launch), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from loclab.cases import CASE_FAMILIES, case_choices, case_names
from loclab.cases.base import DEVICE_CHOICES, SIZE_PRESETS
from loclab.cli_args import (Params, c_options, dims, distinct_option, element_type,
                             function_target, positive_float, positive_int)
from loclab.cli_model import add_model_commands
from loclab.errors import LoclabError, UsageError
from loclab.measure import STRATEGY_NAMES
from loclab.optimize import TARGETS as OPTIMIZE_TARGETS
from loclab.version import __version__


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (no usage dump), exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="loclab", description="Reason about and measure locality of "
                           "reference on multi-core CPUs and GPUs.")
    parser.add_argument("--version", action="version", version=f"loclab {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = commands.add_parser("run", help="run the case studies: validate, time, compare",
                              description="Run every case study's variants on the CPU and "
                              "GPU, validate each against its golden version, and report "
                              "rates against the copy bandwidth measured in the same run.")
    families = "; ".join(f"{name} for {', '.join(cases)}"
                         for name, cases in CASE_FAMILIES.items())
    run.add_argument("--case", action="append", choices=case_choices(), metavar="CASE",
                     help=f"case study to run, repeatable (default: all of "
                          f"{', '.join(case_names())}; {families}); copy, the roof, always "
                          f"runs, and host-device, the link's, before a case rated against it")
    run.add_argument("--device", choices=DEVICE_CHOICES, default="all",
                     help="where to run (default: all found)")
    run.add_argument("--size", choices=SIZE_PRESETS, default="default",
                     help="size preset: small (seconds on 2 cores), default (the lectures'), "
                          "large (at least 4x the last-level cache)")
    run.add_argument("--dims", action="append", type=dims, metavar="NAME=VALUE,...",
                     help="run the --case at this size instead of the preset's, e.g. --case "
                          "mmm --dims m=5000,n=3000,k=700 (repeatable: several sizes)")
    run.add_argument("--threads", type=positive_int, help="CPU threads (default: all cores)")
    run.add_argument("--json", type=Path, metavar="FILE", help="write the results as JSON")
    run.add_argument("--report", type=Path, metavar="DIR",
                     help="write an HTML and Markdown report with charts")
    run.add_argument("--quiet", action="store_true", help="no progress bar and no table")
    run.add_argument("--no-tuned", dest="tuned", action="store_false",
                     help="ignore the tuning cache: run every variant untuned")
    run.add_argument("--tuning-cache", type=Path, metavar="FILE",
                     help="the tuning cache 'loclab tune' wrote (default: $LOCLAB_TUNING_CACHE "
                          "or ~/.cache/loclab/tuning.json)")
    run.set_defaults(handler=_run)

    tune = commands.add_parser(
        "tune", help="autotune a case's variants and cache the best configurations",
        description="Search the parameters (tile sizes, threads) of a case's tunable variants: "
        "every configuration the restrictions allow is built, validated against golden and "
        "timed; the fastest valid one is stored in the tuning cache, which 'loclab run' uses.")
    tune.add_argument("case", choices=case_names(), metavar="CASE",
                      help=f"case study to tune ({', '.join(case_names())})")
    tune.add_argument("--variant", action="append", metavar="NAME",
                      help="variant to tune, repeatable (default: every tunable one)")
    tune.add_argument("--device", choices=DEVICE_CHOICES, default="all",
                      help="where to tune (default: all found)")
    tune.add_argument("--size", choices=SIZE_PRESETS, default="default",
                      help="size preset: every size it names is tuned")
    tune.add_argument("--dims", action="append", type=dims, metavar="NAME=VALUE,...",
                      help="tune at this size instead of the preset's, e.g. --dims "
                           "m=5000,n=3000,k=700 (repeatable)")
    tune.add_argument("--strategy", choices=STRATEGY_NAMES, default="local",
                      help="exhaustive (every configuration), random (seeded samples) or local "
                           "(steepest descent from the best of the default and a few samples; "
                           "the default)")
    tune.add_argument("--budget", type=positive_int, metavar="N",
                      help="build at most N configurations per variant and size (default: "
                           "all for exhaustive, 20 for random, to a local optimum for local)")
    tune.add_argument("--seconds", type=positive_float, metavar="S",
                      help="start no new configuration after S seconds per variant and size")
    tune.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    tune.add_argument("--threads", type=positive_int, help="CPU threads (default: all cores)")
    tune.add_argument("--tuning-cache", type=Path, metavar="FILE",
                      help="where to store the best configurations (default: "
                           "$LOCLAB_TUNING_CACHE or ~/.cache/loclab/tuning.json)")
    tune.add_argument("--json", type=Path, metavar="FILE",
                      help="write every configuration evaluated as JSON")
    tune.add_argument("--quiet", action="store_true", help="no progress bar and no table")
    tune.set_defaults(handler=_tune)

    devices = commands.add_parser("devices", help="show the detected CPU and GPU",
                                  description="Show the CPU and GPU loclab detects, the copy "
                                  "bandwidth it measures on each, and on a GPU the bandwidth "
                                  "of the link between host and device.")
    devices.add_argument("--json", action="store_true", help="print JSON")
    devices.add_argument("--no-measure", action="store_true",
                         help="detect only; skip the copy-bandwidth measurement")
    devices.add_argument("--threads", type=positive_int, help="CPU threads (default: all)")
    devices.set_defaults(handler=_devices)

    analyze = commands.add_parser(
        "analyze", help="dependence analysis of loop nests, explained like the lectures",
        description="Exact dependence analysis (islpy) of the loop nests in a Python or C "
        "file: dependences with direction and distance vectors, which loops are parallel "
        "and what would make the others parallel, legal loop orders, loop distribution.")
    analyze.add_argument("target", metavar="FILE[::FUNCTION]", type=function_target,
                         help="a .py or .c file; ::NAME picks one function (default: all)")
    analyze.add_argument("--json", action="store_true",
                         help="print JSON (an object with ::NAME, else a list)")
    analyze.add_argument("--param", action=Params,
                         help="fix a size parameter (at least 1), repeatable (default: "
                              "symbolic sizes)")
    distinct_option(analyze)
    c_options(analyze)
    analyze.set_defaults(handler=_analyze)

    transform = commands.add_parser(
        "transform", help="apply loop transformations, checked, and emit runnable code",
        description="Apply the lectures' recipes (strip-mine, interchange, tile, distribute, "
        "fuse, skew, privatize, unroll, parallel, stage, copy; grid and block for CUDA) to a "
        "function's "
        "loop nest, each step checked exactly against the dependences; print the "
        "transformed code.")
    transform.add_argument("target", metavar="FILE[::FUNCTION]", type=function_target,
                           help="a .py or .c file; ::NAME picks the function (needed when "
                           "the file holds several)")
    transform.add_argument("--apply", required=True, metavar="STEPS",
                           help='the recipe, steps separated by ";", e.g. '
                           '"tile(i=32, j=32); parallel(ii)"')
    transform.add_argument("--emit", choices=("python", "numba", "cuda", "c"),
                           help="the output language (default: the input's; Python input "
                           "may be emitted as numba, or as cuda: a Python module launching "
                           "CUDA kernels on CuPy arrays, loops mapped by grid and block)")
    transform.add_argument("--dtype", action="append", type=element_type, default=[],
                           metavar="ARRAY=TYPE",
                           help="with --emit cuda: the element type an array's kernels are "
                           "written for, repeatable (default: float32, int64 for arrays "
                           "that index others)")
    transform.add_argument("-o", "--output", type=Path, metavar="FILE",
                           help="write the code to FILE (a new file, or one loclab wrote and "
                                "nobody edited since)")
    transform.add_argument("--force", action="store_true",
                           help="with -o: replace a file loclab wrote even if it was edited "
                                "since (or an older loclab wrote it); never the input or a "
                                "file loclab did not write")
    transform.add_argument("--verify", action="store_true",
                           help="run the original and the result on the same random inputs "
                           "and compare every output")
    transform.add_argument("--param", action=Params, help="a size for --verify (at least "
                           "1), repeatable (default: small odd sizes)")
    transform.add_argument("--inputs", metavar="MODULE.py::FUNC",
                           help="with --verify: verify on the arguments FUNC returns, called "
                           "with the sizes as keyword arguments (a dict by parameter name or "
                           "a tuple in order; default: random inputs loclab sizes)")
    transform.add_argument("--json", action="store_true",
                           help="print the steps, the code and the verification as JSON")
    distinct_option(transform)
    c_options(transform)
    transform.set_defaults(handler=_transform)

    optimize = commands.add_parser(
        "optimize", help="from a golden loop nest to verified, tuned parallel code",
        description="Analyse a Python function's loop nests, decide a recipe (remedies, a "
        "loop order with unit-stride innermost accesses, tiles from the cache model, the "
        "parallel loop), apply it with legality checks, tune the tiles by measurement, "
        "verify the result against the original and time both; every decision is "
        "explained. The explanation goes to stderr, the code to stdout (or -o).")
    optimize.add_argument("path", metavar="FILE::FUNCTION", type=function_target,
                          help="a .py file; ::NAME picks the function (needed when the file "
                               "holds several)")
    optimize.add_argument("--target", choices=OPTIMIZE_TARGETS, default="cpu",
                          help="what to optimize for (cpu: Numba prange; gpu: CUDA C "
                               "launched through CuPy)")
    optimize.add_argument("--param", action=Params, help="a size to tune and time at (at "
                          "least 1), repeatable (default: sizes that run the original about "
                          "2^24 statements)")
    optimize.add_argument("--inputs", metavar="MODULE.py::FUNC",
                          help="run on the arguments FUNC returns, called with the sizes as "
                               "keyword arguments (a dict by parameter name or a tuple in "
                               "order): for a kernel that needs valid inputs (default: random "
                               "inputs loclab sizes)")
    optimize.add_argument("--no-tune", dest="tune", action="store_false",
                          help="keep the first legal recipe and the cache model's tiles: "
                               "measure only the result")
    optimize.add_argument("--threads", type=positive_int, help="CPU threads (default: all)")
    optimize.add_argument("--tuning-cache", type=Path, metavar="FILE",
                          help="where tuned tiles are kept (default: $LOCLAB_TUNING_CACHE or "
                               "~/.cache/loclab/tuning.json)")
    optimize.add_argument("-o", "--output", type=Path, metavar="FILE",
                          help="write the code to FILE (a new file, or one loclab wrote and "
                               "nobody edited since)")
    optimize.add_argument("--force", action="store_true",
                          help="with -o: replace a file loclab wrote even if it was edited "
                               "since (or an older loclab wrote it); never the input or a "
                               "file loclab did not write")
    optimize.add_argument("--json", action="store_true",
                          help="print the decisions, the code, the verification and the "
                               "timing as JSON")
    optimize.add_argument("--fast-math", action="store_true",
                          help="let the compiler fuse multiplies and adds (FMA) and reorder "
                               "sums throughout the CPU code (Numba's fastmath contract and "
                               "reassoc): results within the bound of a reordered sum "
                               "(default: no fused multiply-adds, and sums reordered only "
                               "where a step vectorizes one or splits it among threads)")
    distinct_option(optimize)
    optimize.set_defaults(handler=_optimize)

    compare = commands.add_parser(
        "compare", help="compare two results files, row by row",
        description="Match the rows of two 'loclab run --json' files by case, variant, device "
        "and size; show the ratio of their median times, whether the change is larger than "
        "the two runs' spread, validation changes, and rows found in one file only.")
    compare.add_argument("base", type=Path, metavar="BASE.json", help="the reference run")
    compare.add_argument("new", type=Path, metavar="NEW.json", help="the run compared with it")
    compare.add_argument("--report", type=Path, metavar="DIR",
                         help="write the comparison as HTML and Markdown with a chart")
    compare.add_argument("--json", type=Path, metavar="FILE",
                         help="write the comparison as JSON")
    compare.set_defaults(handler=_compare)

    add_model_commands(commands)

    report = commands.add_parser("report", help="make a report from a results JSON file",
                                 description="Write an HTML and Markdown report, with charts, "
                                 "from the JSON that 'loclab run --json' wrote.")
    report.add_argument("results", type=Path, help="results JSON file")
    report.add_argument("-o", "--output", type=Path, default=Path("report"), metavar="DIR",
                        help="report directory (default: report)")
    report.set_defaults(handler=_report)
    return parser


def _check_writable(path: Path, option: str, directory: bool) -> None:
    """Fail before a long run, not after it, when an output cannot be written."""
    from loclab.outputs import check_file, check_report_directory

    (check_report_directory if directory else check_file)(path, option)


# The document each command's --json writes (``outputs.DOCUMENT_KEYS``).
JSON_KINDS = {"run": "a run's results", "compare": "a comparison",
              "tune": "a tune's configurations"}


def _check_outputs(args: argparse.Namespace, inputs: Sequence[Any] = (),
                   written: Sequence[Any] = ()) -> None:
    """``--json`` and ``--report``, once the request itself is known to be good (a bad size
    must not leave an empty report directory behind) and before any work: apart from the
    files the command reads (``inputs``), from each other and from its other outputs
    (``written``: ``outputs.Place``), then each a new file or loclab's own."""
    from loclab.outputs import Place, check_apart, check_json_output

    json_path, report = args.json, getattr(args, "report", None)
    check_apart([*([Place("--json", json_path)] if json_path else []),
                 *([Place("--report", report, directory=True)] if report else []), *written],
                inputs)
    if json_path:
        check_json_output(json_path, "--json", JSON_KINDS[args.command])
    if report:
        _check_writable(report, "--report", directory=True)


def _tuning_cache(args: argparse.Namespace) -> Any:
    """The tuning cache a command reads or writes (an ``outputs.Place``), as the user named
    it: ``--tuning-cache FILE``, else the default."""
    from loclab.measure.cache import default_path
    from loclab.outputs import Place

    if args.tuning_cache:
        return Place("--tuning-cache", args.tuning_cache)
    return Place("the tuning cache", default_path())


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def _with_progress(work: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """Call ``work(progress)`` under a transient progress bar on stderr where it is a
    terminal; elsewhere (a file, a pipe) with no progress: rich's bar, which only a terminal
    can erase, would leave an empty line there."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    console = _console(stderr=True)
    if not console.is_terminal:
        return work(None)
    with Progress(TextColumn("{task.description:<32}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=console,
                  transient=True) as bar:
        task = bar.add_task("starting", total=None)

        def progress(done: int, total: int, label: str) -> None:
            bar.update(task, completed=done, total=total, description=label)

        return work(progress)


def _run(args: argparse.Namespace) -> int:
    from loclab.bench.runner import execute, plan
    from loclab.report.text import expectation, failures, finished_line

    request = plan(cases=args.case, device=args.device, size=args.size, threads=args.threads,
                   tuned=args.tuned, tuning_cache=args.tuning_cache, dims=args.dims)
    _check_outputs(args, inputs=[_tuning_cache(args)] if args.tuned else [])
    if args.quiet:
        document = execute(request)
        for line in failures(document):
            print(f"loclab run: FAILED {line}", file=sys.stderr)
        return max(_write_outputs(document, args), 1 if document["failures"] else 0)
    from loclab.report.console import print_results

    log = _console(stderr=True)
    log.print(f"loclab run: {request.variant_count} variants of {len(request.case_names)} "
              f"cases on the {' and '.join(d.upper() for d in request.devices)}; expect "
              f"{expectation(request)}", highlight=False, soft_wrap=True)
    if log.is_terminal:
        document = _with_progress(lambda progress: execute(request, progress))
    else:  # a file or a pipe: a line per variant as it finishes, so that a log shows progress
        done = iter(range(1, request.variant_count + 1))
        document = execute(request, finished=lambda row: log.print(
            f"loclab run: [{next(done)}/{request.variant_count}] {finished_line(row)}",
            highlight=False, soft_wrap=True))
    print_results(document, _console())
    return max(_write_outputs(document, args), 1 if document["failures"] else 0)


def _write_json(document: dict[str, Any], args: argparse.Namespace) -> int:
    """Write ``--json`` if asked; a failure is one line on stderr and its exit code."""
    from loclab.bench.results import write_json

    if args.json:
        try:
            write_json(document, args.json)
        except LoclabError as err:
            print(f"loclab {args.command}: error: {err}", file=sys.stderr)
            return err.exit_code
    return 0


def _write_outputs(document: dict[str, Any], args: argparse.Namespace) -> int:
    """Write the JSON, then the report; a failure to write one does not stop the other."""
    from loclab.report import write_report

    code = _write_json(document, args)
    if args.report:
        try:
            index = write_report(document, args.report)
        except LoclabError as err:
            print(f"loclab run: error: {err}", file=sys.stderr)
            return err.exit_code
        if not args.quiet:
            print(f"report: {index}")
    return code


def _tune(args: argparse.Namespace) -> int:
    from loclab.bench.tune import execute_tuning, plan_tuning
    from loclab.report.console import print_tunings, size_text

    cache = _tuning_cache(args)
    request = plan_tuning(args.case, args.variant, device=args.device, size=args.size,
                          strategy=args.strategy, limit=args.budget, seconds=args.seconds,
                          seed=args.seed, threads=args.threads, cache_path=cache.path,
                          dims=args.dims)
    _check_outputs(args, written=[cache])
    _check_writable(cache.path, cache.label, directory=False)
    if args.quiet:
        document = execute_tuning(request)
    else:
        document = _with_progress(lambda progress: execute_tuning(request, progress))
        print_tunings(document, _console())
    for record in document["tunings"]:
        if record["error"]:
            print(f"loclab tune: FAILED {record['case']} {record['variant']} "
                  f"{size_text(record)}: {record['error']}", file=sys.stderr)
    return max(_write_json(document, args), 1 if document["failures"] else 0)


def _devices(args: argparse.Namespace) -> int:
    from loclab.bench.devices import devices
    from loclab.report.text import binary_size, link_text, machine_lines, number, peak_text

    info = devices(measure=not args.no_measure, threads=args.threads)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    from rich.text import Text

    lines = machine_lines(info["machine"])
    for device in ("cpu", "gpu"):
        peak = peak_text(info["references"] or {}, device)
        if peak and info["machine"].get(device):
            lines.append((f"{device.upper()} peak", f"fp32 {peak}"))
    for copy in info["copies"]:
        measured = (f"{number(copy['gbps'])} GB/s" if copy["valid"]
                    else f"FAILED: {copy['error']}")
        lines.append((f"{copy['device'].upper()} copy",
                      f"{copy['variant']}: {measured} (bytes read + written, measured)"))
    link = link_text(info["references"] or {})
    if link:
        copied = binary_size(info["links"][0]["size"]["bytes"]) if info["links"] else "?"
        lines.append(("GPU link", f"{link} (copies of {copied}, measured)"))
    for failed in (row for row in info["links"] if not row["valid"]):
        lines.append(("GPU link", f"{failed['variant']}: FAILED: {failed['error']}"))
    console = _console()
    for label, text in lines:
        console.print(Text.assemble((f"{label:<11} ", "bold"), text))
    return 0


def _analyze(args: argparse.Namespace) -> int:
    from loclab.deps import analyze_file

    path, function = args.target
    analyses = _analyze_with_progress(lambda progress: analyze_file(
        path, function, params=args.param, include_dirs=args.include_dirs,
        defines=dict(args.defines), progress=progress, assume_distinct=args.assume_distinct))
    # on stderr: the JSON on stdout keeps its shape
    for warning in [*analyses.warnings, *map(str, analyses.skipped)]:
        print(f"loclab analyze: warning: {warning}", file=sys.stderr)
    if args.json:
        documents = [a.to_json() for a in analyses]
        print(json.dumps(documents[0] if function else documents, indent=2))
    else:
        print("\n\n".join(a.explain() for a in analyses))
    return 0


MANY_FUNCTIONS = 50  # a file of more functions than this shows a progress bar
PROGRESS_SECONDS = 10  # a log (not a terminal) gets a progress line this often, if ever


def _analyze_with_progress(work: Callable[[Any], Any]) -> Any:
    """``work(progress)`` telling its progress on stderr: a transient bar on a terminal for
    a file of more than MANY_FUNCTIONS functions; elsewhere (a file, a pipe) a line every
    PROGRESS_SECONDS once it runs that long. A short analysis prints nothing."""
    import time

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    console = _console(stderr=True)
    if not console.is_terminal:
        last = time.monotonic()

        def log(done: int, total: int, label: str) -> None:
            nonlocal last
            if done < total and time.monotonic() - last >= PROGRESS_SECONDS:
                last = time.monotonic()
                print(f"loclab analyze: {label}: {done} of {total}", file=sys.stderr,
                      flush=True)

        return work(log)
    with Progress(TextColumn("{task.description:<20}"), BarColumn(), MofNCompleteColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task("reading functions", total=None, visible=False)

        def show(done: int, total: int, label: str) -> None:
            bar.update(task, completed=done, total=total, description=label,
                       visible=total > MANY_FUNCTIONS)

        return work(show)


def _check_code_output(args: argparse.Namespace, source: Path, others: Sequence[Any] = ()
                       ) -> None:
    """``-o FILE`` and ``--force`` of transform and optimize, before any work: ``source`` and
    ``others`` (``outputs.Place``: what else the command reads or writes) and the module of
    ``--inputs`` are never replaced."""
    from loclab.outputs import Place
    from loclab.transform.output import check_output

    if args.inputs is not None:
        others = [*others, Place("--inputs", Path(args.inputs.partition("::")[0]))]
    if args.output is not None:
        check_output(args.output, source, force=args.force, others=others)
    elif args.force:
        print(f"loclab {args.command}: warning: --force does nothing without -o",
              file=sys.stderr)


def _transform(args: argparse.Namespace) -> int:
    from loclab.transform import transform_file
    from loclab.transform.output import write_output

    path, function = args.target
    _check_code_output(args, path)
    if args.param and not args.verify:
        print("loclab transform: warning: --param gives the sizes of --verify: without it, "
              "it does nothing", file=sys.stderr)
    inputs = _inputs(args)
    if args.dtype and args.emit != "cuda":
        raise UsageError("--dtype gives the element types of --emit cuda: add --emit cuda")
    dtypes = dict(args.dtype)
    if len(dtypes) < len(args.dtype):
        raise UsageError("--dtype: an array named twice")
    result = transform_file(path, function, args.apply, emit=args.emit,
                            include_dirs=args.include_dirs, defines=dict(args.defines),
                            assume_distinct=args.assume_distinct, dtypes=dtypes)
    verification = _verified(result, args, inputs) if args.verify else None
    if args.output is not None:
        write_output(args.output, result.source)
    if args.json:
        document = result.to_json()
        document["verification"] = None if verification is None else verification.to_json()
        print(json.dumps(document, indent=2))
    else:
        for step in result.steps:
            print(f"loclab transform: {step.step}: legal ({step.reason})", file=sys.stderr)
        for note in result.notes:
            print(f"loclab transform: note: {note}", file=sys.stderr)
        if verification is not None:
            print(f"loclab transform: {verification}", file=sys.stderr)
        if args.output is None:
            print(result.source, end="")
        else:
            print(f"loclab transform: wrote {args.output}", file=sys.stderr)
    return 0 if verification is None or verification.ok else 1


def _inputs(args: argparse.Namespace) -> Any:
    """The function ``--inputs`` names (None without it), loaded before any work; for
    transform, only with ``--verify``, which it feeds (alone it would be ignored)."""
    from loclab.transform.inputs import load_inputs

    if args.inputs is None:
        return None
    if args.command == "transform" and not args.verify:
        raise UsageError("--inputs gives the inputs of --verify: add --verify")
    return load_inputs(args.inputs)


def _verified(result: Any, args: argparse.Namespace, inputs: Any) -> Any:
    """``transform --verify``: on ``inputs``' arguments or loclab's, saying what runs where
    it takes more than about a second."""
    from loclab.transform.verify import verify

    return verify(result, dict(args.param), inputs=inputs,
                  progress=lambda message: print(f"loclab transform: {message}",
                                                 file=sys.stderr, flush=True))


def _optimize(args: argparse.Namespace) -> int:
    from loclab.optimize import optimize_file
    from loclab.optimize.explain import explain
    from loclab.transform.output import write_output

    path, function = args.path
    _check_code_output(args, path, others=[_tuning_cache(args)])
    if args.tune or args.tuning_cache is not None:  # a search stores into it: check it first
        from loclab.measure.cache import check_is_cache

        check_is_cache(_tuning_cache(args).path)
    inputs = _inputs(args)
    result = optimize_file(path, function, target=args.target,
                           params=dict(args.param), tune=args.tune, threads=args.threads,
                           tuning_cache=args.tuning_cache, inputs=inputs,
                           assume_distinct=args.assume_distinct, fast_math=args.fast_math,
                           progress=lambda message: print(f"loclab optimize: {message}",
                                                          file=sys.stderr, flush=True))
    if args.output is not None:
        write_output(args.output, result.source)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
        return 0
    print(explain(result), file=sys.stderr)
    if args.output is None:
        print(result.source, end="")
    else:
        print(f"loclab optimize: wrote {args.output}", file=sys.stderr)
    return 0


def _compare(args: argparse.Namespace) -> int:
    from loclab.bench.compare import compare
    from loclab.bench.results import load_json
    from loclab.outputs import Place
    from loclab.report.compare import print_comparison, write_comparison_report

    base, new = load_json(args.base), load_json(args.new)
    _check_outputs(args, inputs=[Place("BASE", args.base), Place("NEW", args.new)])
    comparison = compare(base, new, base_label=str(args.base), new_label=str(args.new))
    print_comparison(comparison, _console())
    code = _write_json(comparison, args)
    if args.report:
        print(f"report: {write_comparison_report(comparison, args.report)}")
    return code


def _report(args: argparse.Namespace) -> int:
    from loclab.bench.results import load_json
    from loclab.outputs import Place, check_apart, same_file
    from loclab.report import write_report

    document = load_json(args.results)
    # A report made again from its own results.json writes that file back as it was read.
    rewritten = same_file(args.results, args.output / "results.json")
    check_apart([Place("--output", args.output, directory=True)],
                [] if rewritten else [Place("the results file", args.results)])
    _check_writable(args.output, "--output", directory=True)
    try:
        index = write_report(document, args.output)
    except (KeyError, TypeError, AttributeError) as err:  # a hand-edited or truncated file
        raise UsageError(f"{args.results}: incomplete results file ({type(err).__name__}: "
                         f"{err})") from None
    print(f"report: {index}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if not getattr(args, "handler", None):
        if unknown:
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        parser.print_help()
        return 0
    prog = " ".join(["loclab", args.command, *filter(None, [getattr(args, "model", None)])])
    if unknown:  # argparse would blame plain "loclab", not the command that was given them
        parser.exit(2, f"{prog}: error: unrecognized arguments: {' '.join(unknown)}\n")
    try:
        return args.handler(args)
    except LoclabError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into head: stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as err:  # a bug: one line, and the traceback on request
        if os.environ.get("LOCLAB_DEBUG"):
            raise
        print(f"{prog}: internal error: {type(err).__name__}: {err} (LOCLAB_DEBUG=1 shows "
              f"the traceback)", file=sys.stderr)
        return 1
