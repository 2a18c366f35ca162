"""What a GGUF conversion parses, parsed once.

transformers opens a GGUF file three times when it loads a model from it (the tokenizer, the config, the weights),
and each `gguf.GGUFReader` parses the whole header in Python: the embedded model's 49k-token vocabulary takes ~4 s a
parse on a 2-core EPYC. Mapping the weights' names then builds gguf's name table for the architecture once per module
(397 times for SmolLM2, ~6 s). Both results are read-only once built, so a conversion can share them.
"""

from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def gguf_parsed_once():
    """Within the block, `gguf.GGUFReader(path)` gives one reader per path read, and `gguf.get_tensor_name_map` one
    table per (architecture, blocks): transformers looks both up by name at each use. Outside, gguf is as it was."""
    import gguf

    real_reader, real_names = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[str, object] = {}
    tables: dict[tuple, object] = {}

    def reader(path, mode="r"):
        if mode != "r":  # a writable map is not shared
            return real_reader(path, mode)
        if str(path) not in readers:
            readers[str(path)] = real_reader(path, mode)
        return readers[str(path)]

    def names(arch, n_blocks):
        if (arch, n_blocks) not in tables:
            tables[arch, n_blocks] = real_names(arch, n_blocks)
        return tables[arch, n_blocks]

    gguf.GGUFReader, gguf.get_tensor_name_map = reader, names
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = real_reader, real_names
