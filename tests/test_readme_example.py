"""The Python API example in README.md runs as written."""

import re
from pathlib import Path


def test_readme_python_example_runs():
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README.md has no python example"
    namespace: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    assert namespace["frame1"].freed
    assert namespace["logits"].shape[-1] == namespace["loaded"].config.vocab_size
    assert namespace["step"].batch == [("thinker", 4), ("action", 3)]
