"""Fixtures: the SIMULATED CNDrv (cn_sim/cndrv_sim.c, built here with gcc) and an mlu
plugin instance bound to it. No MLU hardware is involved anywhere in these tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from mlu_simdriver import SimCn
from tritonjit_mlu import MluBackend
from tritonjit_mlu import _driver as d

SOURCE = os.path.join(os.path.dirname(__file__), "sim", "cndrv_sim.c")
# what the simulated device answers for the (assumed) attribute numbers
DEVICE = {d.ATTR_MAX_BLOCK_TASK_DIM_X: 4096, d.ATTR_MAX_BLOCK_TASK_DIM_Y: 64, d.ATTR_MAX_BLOCK_TASK_DIM_Z: 64,
          d.ATTR_MAX_CLUSTER_COUNT: 8, d.ATTR_MAX_CORE_COUNT_PER_CLUSTER: 4}


@pytest.fixture(scope="session")
def cn_sim_lib(tmp_path_factory: pytest.TempPathFactory) -> str:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the simulated CNDrv")
    out = str(tmp_path_factory.mktemp("cn_sim") / "libcndrv_sim.so")
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", out, SOURCE, "-lpthread"], check=True)
    return out


@pytest.fixture
def cn_sim(cn_sim_lib: str) -> SimCn:
    s = SimCn(cn_sim_lib)
    s.lib.sim_reset()
    for attr, value in DEVICE.items():
        s.lib.sim_set_attribute(attr, value)
    return s


@pytest.fixture
def mlu(cn_sim: SimCn) -> MluBackend:
    return MluBackend(library=cn_sim.path)
