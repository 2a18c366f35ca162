"""Linear layers on the kernel the CPU path chose for their row count: native GEMM/GEMV or oneDNN prepacked.

Measured, not assumed (model/cpu_path.py): fp32 steps of 2+ rows ran ~1.7x faster on oneDNN's prepacked weights on an
AVX2 EPYC; bf16 1-row steps took the native gemv on AVX-512. The packed copy costs memory once; the parameters
are untouched (tied embeddings stay tied, weight hashes stay the same).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from agent_runtime.model.cpu_path import KernelTable, linear_step, onednn_available

PACK_ROWS_HINT = 32  # oneDNN reorders for this batch size; other row counts read the same layout


class CpuLinear(nn.Linear):
    """nn.Linear whose products take the kernel its table names for their row count."""

    packed: torch.Tensor | None  # None: packed at the first product that takes oneDNN
    table: KernelTable

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // x.shape[-1]
        if x.device.type != "cpu" or self.table.kernel_for(rows) != "onednn":
            return F.linear(x, self.weight, self.bias)  # native kernels; a model moved off the CPU
        if self.packed is None and x.dtype == self.weight.dtype:
            self.packed = _pack(self.weight)
        if self.packed is None or x.dtype != self.packed.dtype:
            return F.linear(x, self.weight, self.bias)  # a model cast to another dtype since
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")


def _pack(weight: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), PACK_ROWS_HINT)


def adopt_linears(model: nn.Module, table: KernelTable, features, *, lazy=()) -> int:
    """Give every CPU linear of `model` the kernels of `table` (idempotent); returns how many use oneDNN.

    Nothing is packed where oneDNN cannot run the model's dtype here: those linears stay plain. The modules in
    `lazy` are packed at their first oneDNN product (none, when another module computes theirs)."""
    if "onednn" not in table.kernels or not onednn_available(next(model.parameters()).dtype, features):
        return 0
    lazy = {id(m) for m in lazy}
    count = 0
    for module in model.modules():
        if type(module) is nn.Linear and module.weight.device.type == "cpu":
            module.__class__ = CpuLinear  # in place: the same parameters, the same module tree
            module.packed = None if id(module) in lazy else _pack(module.weight)
        if isinstance(module, CpuLinear):
            module.table = table
            count += 1
    return count


def step_kernels(table: KernelTable, rows: int):
    """Context for one forward of `rows` rows: bf16 steps on the native kernels run with oneDNN off."""
    return linear_step(rows > 0 and table.dtype == "bfloat16" and table.kernel_for(rows) == "native")
