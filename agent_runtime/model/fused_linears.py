"""One linear over the weights of several that read the same input (q/k/v, gate/up), stacked along the output.

Why: a decision step calls ~210 linears of a few hundred kB each; every call pays the kernel's setup and its
threads' ramp-up, and 2-core CPUs stream small matrices well below their memory bandwidth. Stacking q/k/v and
gate/up makes 4 calls a layer instead of 7 (measured: the linears alone ~1.15x faster at a decision's 14 rows, the
decision's whole forward ~1.04x; docs/benchmarks.md). Each output column is the
same dot product over the same input, so the products are bit-identical to the separate modules' (tested at the
model's shapes on each kernel). The separate modules' weights become views of the stacked weight: no second
copy, the same parameters, the same weight hash.
"""

import weakref

import torch
import torch.nn as nn

from agent_runtime.model.linear_kernels import CpuLinear

_FUSED: "weakref.WeakKeyDictionary[nn.Module, dict]" = weakref.WeakKeyDictionary()  # model -> {names: fused}


def fusible(modules) -> bool:
    """Plain linears (not wrapped by LoRA or quantized) on the CPU with one input size, dtype and bias kind."""
    first = modules[0]
    return (all(type(m) in (nn.Linear, CpuLinear) for m in modules)
            and all(m.weight.device.type == "cpu" and m.weight.dtype == first.weight.dtype
                    and m.in_features == first.in_features and (m.bias is None) == (first.bias is None)
                    for m in modules))


def _views_of(stacked: torch.Tensor, modules) -> bool:
    """Whether every module's weight is still the view of `stacked` that fusing made it (nothing replaced it)."""
    offset = 0
    for m in modules:
        w = m.weight
        if (w.untyped_storage().data_ptr() != stacked.untyped_storage().data_ptr()
                or w.storage_offset() != stacked.storage_offset() + offset * stacked.shape[1]):
            return False
        offset += m.out_features
    return True


def fused_linear(model: nn.Module, key: str, modules) -> nn.Linear | None:
    """The stacked linear of `modules` (None where they are not fusible); made once per model and key."""
    modules = list(modules)
    if not fusible(modules):
        return None
    cache = _FUSED.setdefault(model, {})
    fused = cache.get(key)
    if fused is not None and _views_of(fused.weight, modules):
        return fused
    first = modules[0]
    with torch.no_grad():
        weight = torch.cat([m.weight.detach() for m in modules]).contiguous()
        bias = None if first.bias is None else torch.cat([m.bias.detach() for m in modules]).contiguous()
    fused = nn.Linear(first.in_features, weight.shape[0], bias=bias is not None, device="meta")
    fused.weight = nn.Parameter(weight, requires_grad=False)
    if bias is not None:
        fused.bias = nn.Parameter(bias, requires_grad=False)
    start = 0
    for m in modules:  # the separate modules read their rows of the stacked weight: one copy in memory
        end = start + m.out_features
        m.weight = nn.Parameter(weight[start:end], requires_grad=m.weight.requires_grad)
        if bias is not None:
            m.bias = nn.Parameter(bias[start:end], requires_grad=m.bias.requires_grad)
        start = end
    cache[key] = fused
    return fused
