"""Shared fixtures: the recorded random seed and the castscope-cli executable."""
import glob
import os
import random
import shutil
import zlib

import numpy as np
import pytest

SEED = int(os.environ.get("CASTSCOPE_TEST_SEED", random.SystemRandom().randrange(1 << 31)))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pytest_report_header(config):
    return f"castscope seed {SEED} (rerun with CASTSCOPE_TEST_SEED={SEED})"


@pytest.fixture
def rng(request):
    # One stream per test, derived from the run's seed and the test's name, so a failing test
    # reproduces alone with the same CASTSCOPE_TEST_SEED.
    return np.random.default_rng([SEED, zlib.crc32(request.node.name.encode())])


# Tests that open ONNX files through the engine need a build with its ONNX reader (a build
# without libonnx-dev, such as a GPU machine's, skips them and says why).
def _onnx_reader():
    try:
        import castscope

        return bool(castscope.backend_info().get("onnx_reader", True))
    except ImportError:
        return True


needs_onnx_reader = pytest.mark.skipif(
    not _onnx_reader(), reason="this build of CastScope has no ONNX reader (libonnx-dev)"
)


def find_cli():
    cli = os.environ.get("CASTSCOPE_CLI")
    if cli:
        return cli
    for pattern in ("build*/app/castscope-cli",):
        hits = sorted(glob.glob(os.path.join(ROOT, pattern)), key=os.path.getmtime)
        if hits:
            return hits[-1]
    return shutil.which("castscope-cli")


@pytest.fixture(scope="session")
def cli():
    path = find_cli()
    if not path or not os.path.exists(path):
        if os.environ.get("CI"):
            pytest.fail("castscope-cli not found: set CASTSCOPE_CLI")
        pytest.skip("castscope-cli not built (set CASTSCOPE_CLI)")
    return path
