"""The Python API examples in README.md and docs/pixels.md run as written."""

import re
from pathlib import Path

import pytest


def test_readme_python_example_runs():
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README.md has no python example"
    namespace: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    assert namespace["frame1"].freed
    assert namespace["logits"].shape[-1] == namespace["loaded"].config.vocab_size
    assert namespace["step"].batch == [("thinker", 4), ("action", 3)]


@pytest.mark.slow
def test_readme_gymnasium_example_plays_from_screens():
    """docs/pixels.md's: the embedded model, its adapter and the shipped detector on screen-only observations."""
    text = (Path(__file__).resolve().parent.parent / "docs" / "pixels.md").read_text()
    (block,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["agent"].decisions >= 5
    assert namespace["runtime"].frame_encoder.source == "pixels"
    assert namespace["agent"].agent.stats.frames_prefilled >= 20  # basic may end early: the cacodemon killed
