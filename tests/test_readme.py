"""The README's first screen and CI must agree: CI runs exactly the README's two commands."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands():
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```sh\n(.+?)\n```", text.split("## What")[0])


def test_first_screen_gives_the_main_job_then_the_tests():
    main_job, tests = readme_commands()
    assert main_job.endswith("loclab run")
    assert tests.endswith("pytest -n auto")  # the suite on every core (pytest-xdist)


def test_ci_runs_the_readme_commands_verbatim():
    ci = (ROOT / ".ci" / "run").read_text()
    for command in readme_commands():
        assert command in ci.splitlines(), command
