"""What the Python-driven app tests share: their seed and work directory, and one scripted app
session under xvfb-run. The tests run as `python3 tests/gui/NAME.py ...`, so this module sits
beside them on sys.path."""
import os
import shutil
import subprocess


def prepare(what, work):
    """The run's seed (CASTSCOPE_TEST_SEED, else a fresh one; printed for a re-run), with the work
    directory made; None where xvfb-run is missing (the test then exits 77, a skip)."""
    if not shutil.which("xvfb-run"):
        print(f"{what}: xvfb-run not found")
        return None
    seed = int(os.environ.get("CASTSCOPE_TEST_SEED", "0")) or int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}")
    os.makedirs(work, exist_ok=True)
    return seed


def begin(what):
    """A test's start from its command line (APP CHECKER WORKDIR): app, checker, work directory
    and a numpy generator seeded as prepare() gives it; None where the test is to be skipped."""
    import sys

    import numpy as np
    app, checker, work = sys.argv[1:4]
    seed = prepare(what, work)
    if seed is None:
        return None
    return app, checker, work, np.random.default_rng(seed)


def run_app(app, work, name, script_text):
    """The app run under xvfb-run on a script (written to work as NAME.txt), with its settings in
    work: the finished process and the path of the state file it wrote (NAME_state.json)."""
    script = os.path.join(work, f"{name}.txt")
    with open(script, "w") as f:
        f.write(script_text)
    state = os.path.join(work, f"{name}_state.json")
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(work, "config"))
    r = subprocess.run(["xvfb-run", "-a", "-s", "-screen 0 1600x1000x24", app, "--script", script,
                        "--state", state], cwd=work, env=env)
    return r, state
