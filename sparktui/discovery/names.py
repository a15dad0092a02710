"""Names for the config: made valid for the spec's patterns, and unique where they must be."""

from __future__ import annotations

import re
from collections.abc import Sequence

from sparktui.discovery.plan import PlannedLlama, PlannedNim, PlannedSglang, PlannedTrtllm, PlannedVllm
from sparktui.discovery.probes import LlamaAnswer
from sparktui.model.specs import NAME_RE


def config_name(text: str | None) -> str | None:
    """``text`` made into a valid node/vLLM/service name (letters, digits, ``._-``; ≤ 63), or None."""
    if not text:
        return None
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", text)
    cleaned = re.sub(r"^[^A-Za-z0-9]+", "", cleaned)[:63]
    return cleaned if cleaned and NAME_RE.fullmatch(cleaned) else None


def unique(name: str, taken: set[str], suffix: str | None = None) -> str:
    """``name``, or ``name-SUFFIX`` / ``name-2``... when taken; adds the result to ``taken``."""
    candidates = [name]
    if suffix:
        candidates.append(f"{name[: 62 - len(suffix)]}-{suffix}")
    candidates += [f"{name[:59]}-{n}" for n in range(2, 1000)]
    chosen = next(c for c in candidates if c not in taken)
    taken.add(chosen)
    return chosen


def node_names(hosts: Sequence[str], hostnames: Sequence[str | None]) -> list[tuple[str, str]]:
    """(name, how it was chosen) for each host: its short hostname over SSH, else the host argument."""
    taken: set[str] = set()
    out: list[tuple[str, str]] = []
    for host, hostname in zip(hosts, hostnames, strict=True):
        short = hostname.strip().split(".", 1)[0] if hostname and hostname.strip() else None
        from_hostname = config_name(short)
        if from_hostname is not None:
            base, how = from_hostname, "the host's `hostname`, over SSH"
        else:
            base, how = config_name(host) or "node", "the host argument"
        name = unique(base, taken)
        out.append((name, how if name == base else f"{how}, made unique"))
    return out


def _strip_vllm(name: str, engine: str = "vllm") -> str:
    stem = name.removesuffix(".service")
    for prefix in (f"{engine}-", f"{engine}_"):
        if stem.lower().startswith(prefix) and len(stem) > len(prefix):
            return stem[len(prefix) :]
    return stem


def _model_tail(model: str | None) -> str | None:
    return model.rstrip("/").rsplit("/", 1)[-1] if model else None


def vllm_name(plan: PlannedVllm) -> str | None:
    """A vLLM entry's name: --served-model-name, else its unit or container, else the model it serves."""
    launch, args = plan.launch, plan.launch.vllm if plan.launch else None
    if args is not None and args.served_model_name:
        return config_name(args.served_model_name)
    if launch is not None:
        return config_name(_strip_vllm(launch.unit or launch.container or ""))
    if plan.http is not None and plan.http.models:
        return config_name(_model_tail(plan.http.models[0]))
    return None


ROUTER_NAME = "llama-router"
_SPLIT_GGUF = re.compile(r"-\d{5}-of-\d{5}$")  # model-00001-of-00003.gguf: the first part of a split GGUF


def model_file_stem(path: str) -> str:
    """``/models/Qwen3-8B-Q4_K_M.gguf`` → ``Qwen3-8B-Q4_K_M`` (a split GGUF's part number dropped)."""
    tail = path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    stem = tail[: -len(".gguf")] if tail.lower().endswith(".gguf") else tail
    return _SPLIT_GGUF.sub("", stem)


def llama_name(answer: LlamaAnswer) -> str | None:
    """A llama-server entry's name: ``llama-router`` for a router, else its --alias, else the stem of
    the model file it loaded."""
    return _llama_name(router=answer.router, alias=answer.alias, model=answer.model_path)


def _llama_name(*, router: bool, alias: str | None, model: str | None) -> str | None:
    if router:
        return ROUTER_NAME
    if alias:
        return config_name(alias)
    return config_name(model_file_stem(model)) if model else None


def planned_llama_name(plan: PlannedLlama) -> str | None:
    """What ``llama_name`` says of the server that answered; for one that did not, the same read from
    its command line (``-hf`` for the model when there is no ``-m``), else its unit or container."""
    if plan.http is not None:
        return llama_name(plan.http)
    launch = plan.launch
    args = launch.llama if launch is not None else None
    if args is not None:
        found = _llama_name(router=args.router, alias=args.alias, model=args.model or _model_tail(args.hf_repo))
        if found is not None:
            return found
    return config_name((launch.unit or launch.container or "").removesuffix(".service")) if launch else None


SGLANG_NAME = "sglang"  # an SGLang entry's name when nothing better is known


def sglang_name(plan: PlannedSglang) -> tuple[str | None, str]:
    """An SGLang entry's name and where it came from: its --served-model-name (the command line's, else
    the one ``/server_info`` gives), else the last part of the model it serves, else its unit or
    container (less ``sglang-``); (None, ...) when nothing gives one."""
    launch, http = plan.launch, plan.http
    args = launch.sglang if launch is not None else None
    info = http.info if http is not None else None
    served = (args.served_model_name if args is not None else None) or (info.served_model_name if info else None)
    if served:
        return config_name(served), "--served-model-name"
    model = (info.model_path if info else None) or (args.model_path if args is not None else None)
    if model is None and http is not None and http.models:
        model = http.models[0]
    if model:
        return config_name(_model_tail(model)), "from the model it serves"
    if launch is not None:
        kind = "unit" if launch.unit else "container"
        return config_name(_strip_vllm(launch.unit or launch.container or "", "sglang")), f"from the {kind} name"
    return None, "rename it at will"


TRTLLM_NAME = "trtllm"  # a TensorRT-LLM entry's name when it lists no model
NIM_NAME = "nim"  # a NIM entry's name when it lists no model
OLLAMA_NAME = "ollama"  # an Ollama entry's name: it serves every model on its disk, none names it


def served_model_name(plan: PlannedTrtllm | PlannedNim, fallback: str) -> tuple[str, str]:
    """A TensorRT-LLM or NIM entry's name and where it came from: the last part of the first model its
    ``/v1/models`` lists (``meta/llama-3.1-8b-instruct`` -> ``llama-3.1-8b-instruct``), else of a
    trtllm-serve's MODEL on its command line, else of a NIM container's ``NIM_SERVED_MODEL_NAME`` or the model
    its image is named for, else its unit or container (less ``trtllm-``), else ``fallback``."""
    models = plan.http.models if plan.http is not None else ()
    found = config_name(_model_tail(models[0])) if models else None
    if found is not None:
        return found, "from the model it serves (/v1/models)"
    launch = plan.launch
    args = launch.trtllm if launch is not None else None
    found = config_name(_model_tail(args.model)) if args is not None else None
    if found is not None:
        return found, "from the MODEL of its command line"
    nim = launch.nim if launch is not None else None
    if nim is not None and (nim.served_model_name or nim.model):
        found = config_name(_model_tail(nim.served_model_name or nim.model))
        how = "NIM_SERVED_MODEL_NAME" if nim.served_model_name else "from the model its image is named for"
        if found is not None:
            return found, how
    if launch is not None:
        found = config_name(_strip_vllm(launch.unit or launch.container or "", "trtllm"))
        if found is not None:
            return found, f"from the {'unit' if launch.unit else 'container'} name"
    return fallback, "rename it at will"
