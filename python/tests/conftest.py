# SPDX-License-Identifier: Apache-2.0
"""One Context for the session, on the default device (VKPAGED_DEVICE chooses another: it reads the
environment, as the C++ suite's Contexts do) with the Khronos validation layer on, as the C++ suite
runs (VKPAGED_PYTHON_VALIDATION=0 turns it off): the session fails when the layer reported
anything."""
import os
import sys
import zlib

import numpy as np
import pytest

import vkpaged

sys.path.insert(0, os.path.dirname(__file__))  # steps
# contract_math: the contract's reference, one for these tests and the CLI's contract checks.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "tools"))


@pytest.fixture(scope="session")
def ctx():
    context = vkpaged.Context(validation=os.environ.get("VKPAGED_PYTHON_VALIDATION", "1") != "0",
                              read_environment=True)
    yield context
    assert context.validation_message_count == 0, "the validation layer reported messages (on stderr)"


@pytest.fixture
def rng(request):
    # A seed per test, so that a failure reproduces alone.
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))
