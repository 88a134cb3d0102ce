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

from loclab import __version__
from loclab.bench.tuning import STRATEGY_NAMES
from loclab.cases import CASE_FAMILIES, case_choices, case_names
from loclab.cases.base import DEVICE_CHOICES, SIZE_PRESETS
from loclab.cli_args import c_options, dims, param, positive_float, positive_int
from loclab.cli_model import add_model_commands
from loclab.errors import LoclabError, UsageError
from loclab.optimize import TARGETS as OPTIMIZE_TARGETS


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
    analyze.add_argument("target", metavar="FILE[::FUNCTION]",
                         help="a .py or .c file; ::NAME picks one function (default: all)")
    analyze.add_argument("--json", action="store_true",
                         help="print JSON (an object with ::NAME, else a list)")
    analyze.add_argument("--param", action="append", default=[], type=param,
                         metavar="NAME=VALUE",
                         help="fix a size parameter, repeatable (default: symbolic sizes)")
    c_options(analyze)
    analyze.set_defaults(handler=_analyze)

    transform = commands.add_parser(
        "transform", help="apply loop transformations, checked, and emit runnable code",
        description="Apply the lectures' recipes (strip-mine, interchange, tile, distribute, "
        "privatize, unroll, parallel, stage, copy) to a function's loop nest, each step "
        "checked exactly against the dependences; print the transformed code.")
    transform.add_argument("target", metavar="FILE[::FUNCTION]",
                           help="a .py or .c file; ::NAME picks the function (needed when "
                           "the file holds several)")
    transform.add_argument("--apply", required=True, metavar="STEPS",
                           help='the recipe, steps separated by ";", e.g. '
                           '"tile(i=32, j=32); parallel(ii)"')
    transform.add_argument("--emit", choices=("python", "numba", "c"),
                           help="the output language (default: the input's; Python input "
                           "may be emitted as numba)")
    transform.add_argument("-o", "--output", type=Path, metavar="FILE",
                           help="write the code to FILE (a new file, or one loclab wrote)")
    transform.add_argument("--verify", action="store_true",
                           help="run the original and the result on the same random inputs "
                           "and compare every output")
    transform.add_argument("--param", action="append", default=[], type=param,
                           metavar="NAME=VALUE", help="a size for --verify, repeatable "
                           "(default: small odd sizes)")
    transform.add_argument("--json", action="store_true",
                           help="print the steps, the code and the verification as JSON")
    c_options(transform)
    transform.set_defaults(handler=_transform)

    optimize = commands.add_parser(
        "optimize", help="from a golden loop nest to verified, tuned parallel code",
        description="Analyse a Python function's loop nests, decide a recipe (remedies, a "
        "loop order with unit-stride innermost accesses, tiles from the cache model, the "
        "parallel loop), apply it with legality checks, tune the tiles by measurement, "
        "verify the result against the original and time both; every decision is "
        "explained. The explanation goes to stderr, the code to stdout (or -o).")
    optimize.add_argument("path", metavar="FILE::FUNCTION",
                          help="a .py file; ::NAME picks the function (needed when the file "
                               "holds several)")
    optimize.add_argument("--target", choices=OPTIMIZE_TARGETS, default="cpu",
                          help="what to optimize for (cpu: Numba prange; gpu: CUDA C "
                               "launched through CuPy)")
    optimize.add_argument("--param", action="append", default=[], type=param,
                          metavar="NAME=VALUE", help="a size to tune and time at, repeatable "
                          "(default: sizes that run the original about 2^24 statements)")
    optimize.add_argument("--no-tune", dest="tune", action="store_false",
                          help="keep the first legal recipe and the cache model's tiles: "
                               "measure only the result")
    optimize.add_argument("--threads", type=positive_int, help="CPU threads (default: all)")
    optimize.add_argument("--tuning-cache", type=Path, metavar="FILE",
                          help="where tuned tiles are kept (default: $LOCLAB_TUNING_CACHE or "
                               "~/.cache/loclab/tuning.json)")
    optimize.add_argument("-o", "--output", type=Path, metavar="FILE",
                          help="write the code to FILE (a new file, or one loclab wrote)")
    optimize.add_argument("--json", action="store_true",
                          help="print the decisions, the code, the verification and the "
                               "timing as JSON")
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


def _check_outputs(args: argparse.Namespace) -> None:
    """``--json`` and ``--report``, once the request itself is known to be good (a bad size
    must not leave an empty report directory behind)."""
    if args.json:
        _check_writable(args.json, "--json", directory=False)
    if args.report:
        _check_writable(args.report, "--report", directory=True)


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def _with_progress(work: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """Call ``work(progress)`` under a transient progress bar on stderr."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    with Progress(TextColumn("{task.description:<32}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=_console(stderr=True),
                  transient=True) as bar:
        task = bar.add_task("starting", total=None)

        def progress(done: int, total: int, label: str) -> None:
            bar.update(task, completed=done, total=total, description=label)

        return work(progress)


def _run(args: argparse.Namespace) -> int:
    from loclab.bench.runner import execute, plan
    from loclab.report.text import duration, failures, finished_line

    request = plan(cases=args.case, device=args.device, size=args.size, threads=args.threads,
                   tuned=args.tuned, tuning_cache=args.tuning_cache, dims=args.dims)
    _check_outputs(args)
    if args.quiet:
        document = execute(request)
        for line in failures(document):
            print(f"loclab run: FAILED {line}", file=sys.stderr)
        return max(_write_outputs(document, args), 1 if document["failures"] else 0)
    from loclab.report.console import print_results

    log = _console(stderr=True)
    log.print(f"loclab run: {request.variant_count} variants of {len(request.case_names)} "
              f"cases on the {' and '.join(d.upper() for d in request.devices)}; expect about "
              f"{duration(request.expected_seconds())}", highlight=False, soft_wrap=True)
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
    from loclab.bench.tuning.cache import default_path
    from loclab.bench.tuning.session import execute_tuning, plan_tuning
    from loclab.report.console import print_tunings, size_text

    cache = args.tuning_cache or default_path()
    request = plan_tuning(args.case, args.variant, device=args.device, size=args.size,
                          strategy=args.strategy, limit=args.budget, seconds=args.seconds,
                          seed=args.seed, threads=args.threads, cache_path=cache,
                          dims=args.dims)
    _check_writable(cache, "--tuning-cache" if args.tuning_cache else "tuning cache",
                    directory=False)
    if args.json:
        _check_writable(args.json, "--json", directory=False)
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

    path, _, function = args.target.partition("::")
    analyses = analyze_file(path, function or None, params=dict(args.param),
                            include_dirs=args.include_dirs, defines=dict(args.defines))
    for skipped in analyses.skipped:  # on stderr: the JSON on stdout keeps its shape
        print(f"loclab analyze: warning: {skipped}", file=sys.stderr)
    if args.json:
        documents = [a.to_json() for a in analyses]
        print(json.dumps(documents[0] if function else documents, indent=2))
    else:
        print("\n\n".join(a.explain() for a in analyses))
    return 0


def _transform(args: argparse.Namespace) -> int:
    from loclab.transform import transform_file
    from loclab.transform.output import check_output, write_output

    path, _, function = args.target.partition("::")
    if args.output is not None:
        check_output(args.output, Path(path))
    result = transform_file(path, function or None, args.apply, emit=args.emit,
                            include_dirs=args.include_dirs, defines=dict(args.defines))
    verification = result.verify(**dict(args.param)) if args.verify else None
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


def _optimize(args: argparse.Namespace) -> int:
    from loclab.optimize import optimize_file
    from loclab.optimize.explain import explain
    from loclab.transform.output import check_output, write_output

    path, _, function = args.path.partition("::")
    if args.output is not None:
        check_output(args.output, Path(path))
    if args.tuning_cache is not None:
        from loclab.bench.tuning.cache import check_is_cache

        check_is_cache(args.tuning_cache)
    result = optimize_file(path, function or None, target=args.target,
                           params=dict(args.param), tune=args.tune, threads=args.threads,
                           tuning_cache=args.tuning_cache,
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
    from loclab.bench.results import load_json, write_json
    from loclab.report.compare import print_comparison, write_comparison_report

    base, new = load_json(args.base), load_json(args.new)
    _check_outputs(args)
    comparison = compare(base, new, base_label=str(args.base), new_label=str(args.new))
    print_comparison(comparison, _console())
    if args.json:
        write_json(comparison, args.json)
    if args.report:
        print(f"report: {write_comparison_report(comparison, args.report)}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from loclab.bench.results import load_json
    from loclab.report import write_report

    document = load_json(args.results)
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
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 0
    prog = " ".join(["loclab", args.command, *filter(None, [getattr(args, "model", None)])])
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
