"""The liegroups examples of the root README and of packages/liegroups/README.md must run."""

import pathlib
import re

import numpy as np
import pytest
from chetaev.liegroups import SO3, retraction

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_root_readme_example():
    cay = retraction(SO3, "cayley")
    xi = np.array([0.3, -0.2, 0.5])
    R = cay(xi)
    assert SO3.is_element(R)
    # measured: <= 6.7e-16 against np.allclose's defaults (README: user-facing check)
    assert np.allclose(cay.inv(R), xi)
    assert np.allclose(cay.dL_inv(xi) @ cay.dL(xi), np.eye(3))
    xis = 0.5 * np.random.default_rng(0).normal(size=(1000, 3))
    Rs = SO3.exp(xis)
    assert np.allclose(SO3.log(Rs), xis)


def test_package_readme_code_blocks_run():
    if not README.exists():  # installed without the source tree
        pytest.skip("README.md not available")
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert blocks, "no python code block in README.md"
    for code in blocks:
        exec(compile(code, str(README), "exec"), {})
