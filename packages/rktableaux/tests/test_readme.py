"""The README example runs and prints what it says."""

import contextlib
import io
import pathlib
import re


def test_readme_example_runs():
    text = (pathlib.Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        # measured: 5.6e-17 (deterministic; same for BLAS threads 1, unset): margin 180
        exec(compile(code, "README.md", "exec"), {})
    lines = out.getvalue().splitlines()
    assert "4 True" in lines
    assert "True True True True True True" in lines
    assert "SimplifyingOrders(B=4, C=3, D=1)" in lines
    assert "10 5 True" in lines
    assert lines.count("True") >= 1
    assert "1" in lines
