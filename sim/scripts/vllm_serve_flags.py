"""Every option `vllm serve` accepts, read from vLLM's own argument parser, and how it treats sample words.

usage: python3 sim/scripts/vllm_serve_flags.py VLLM_SRC OUT.json

VLLM_SRC is a folder holding the `vllm` package of the wheel the project runs (0.26.0: the bundle of
../shared/vllm/make-bundle.sh carries it stripped of kernels Hopper never loads; its parts rebuild it):

    mkdir -p /tmp/vsrc && cat .device/v8/p*/part.* | tar xf - -C /tmp/vsrc bundle/vllm-stripped.tar.zst
    zstd -dc /tmp/vsrc/bundle/vllm-stripped.tar.zst | tar xf - -C /tmp/vsrc

The parser is built as `vllm serve` builds it (`make_arg_parser` on a `FlexibleArgumentParser`,
vllm/entrypoints/cli/serve.py) in a Python of the GPU image's minor version (3.12) with vLLM's pure-Python
dependencies installed (pydantic, transformers, fastapi, openai, pyzmq, ... : whatever the import names)
and without torch or triton: those two are replaced by permissive stand-ins, since building the parser
needs their names but never their kernels. Three hooks keep the stand-ins from mattering: the installed
torch version is read as 2.11.0 (the image's), vLLM's custom-op registration is skipped, and a config
default that cannot be built without torch is left as its declaration (`_compute_kwargs` builds defaults
inside `suppress_logging`; only a flag's default, never its option strings or arity, depends on it).

The output (`afd-vllm-serve-flags`) lists each option's spellings, how many values it takes (argparse's
nargs: none, one, one or more, optional) and its choices; then sample command lines parsed by the real
parser (`parse_args`, as vllm/entrypoints/cli/main.py calls it), each accepted (with the values it set)
or refused (with argparse's message), and the attention backends `--attention-backend` may name
(`AttentionBackendEnum`, which the attention config's validator reads the value as): the cases the simulator's own reading of serve words is tested
against (sim/src/deployment/serve_args/tests.rs).
"""
import argparse
import contextlib
import datetime
import importlib.abc
import importlib.machinery
import importlib.metadata
import io
import json
import os
import platform
import sys
import types

STUBBED = ("torch", "triton")


class _Anything(type):
    """A class whose every attribute, call, item and union is another such class."""

    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Anything(name, (object,), {})

    def __call__(cls, *args, **kwargs):
        return _Anything("instance", (object,), {})

    def __or__(cls, other):
        return cls

    def __ror__(cls, other):
        return cls

    def __getitem__(cls, key):
        return cls

    def __iter__(cls):
        return iter(())

    def __bool__(cls):
        return False

    def __int__(cls):
        return 0

    def __index__(cls):
        return 0

    def __lt__(cls, other):
        return False

    def __gt__(cls, other):
        return False

    def __le__(cls, other):
        return True

    def __ge__(cls, other):
        return True


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Anything(name, (object,), {})


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def serve_parser(vllm_src):
    """`vllm serve`'s parser, built from the vLLM package under `vllm_src`."""
    sys.meta_path.insert(0, _StubFinder())
    sys.path.insert(0, vllm_src)
    real_version = importlib.metadata.version

    def version(name):
        return "2.11.0" if name.split(".")[0] in STUBBED else real_version(name)

    importlib.metadata.version = version
    import vllm.utils.torch_utils as torch_utils

    torch_utils.direct_register_custom_op = lambda *args, **kwargs: None
    from vllm.entrypoints.openai.cli_args import make_arg_parser
    import vllm.engine.arg_utils as arg_utils
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    arg_utils.suppress_logging = lambda: contextlib.suppress(Exception)
    vllm_version = real_version("vllm") if _installed("vllm") else _version_file(vllm_src)
    return make_arg_parser(FlexibleArgumentParser(prog="vllm serve")), vllm_version


def _installed(name):
    try:
        importlib.metadata.version(name)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def _version_file(vllm_src):
    scope = {}
    exec(open(os.path.join(vllm_src, "vllm", "_version.py")).read(), scope)
    return scope.get("__version__") or scope.get("version")


VALUES = {0: "none", None: "one", "+": "one-or-more", "?": "optional"}

# Words after `vllm serve`, each parsed on its own by the real parser. Accepted ones show the values
# vLLM read (by destination); refused ones argparse's message. Chosen where argparse's rules
# (abbreviations, attached values, arity, choices) and FlexibleArgumentParser's rewriting decide.
SAMPLES = [
    ["/m", "--max-num-seqs", "64"],
    ["/m", "--max-num-seq", "64"],
    ["/m", "--max-num", "64"],
    ["/m", "--max_num_seqs", "8"],
    ["/m", "--max-num-batched", "128", "--enable-prefix"],
    ["/m", "--enforce"],
    ["/m", "--no-enforce"],
    ["/m", "--enforce-eager=true"],
    ["/m", "-tp", "2"],
    ["/m", "-tp=2"],
    ["/m", "-tp2"],
    ["/m", "-dp2"],
    ["/m", "-t", "2"],
    ["/m", "-t=2"],
    ["/m", "-d", "2"],
    ["/m", "--max-num-seq=64"],
    ["/m", "-O3"],
    ["/m", "-O", "0"],
    ["/m", "--bogus", "3"],
    ["/m", "--swap-space", "4"],
    ["/m", "--disable-log-requests"],
    ["/m", "--cuda-graph-sizes", "8"],
    ["/m", "--cudagraph-capture-sizes", "8", "16"],
    ["/m", "--cudagraph-capture-sizes"],
    ["/m", "--kv-cache-dtype", "fp8"],
    ["/m", "--kv-cache-dtype", "fp9"],
    ["/m", "--dtype", "FP16"],
    ["/m", "--seed", "-1"],
    ["/m", "--served-model-name", "a", "b"],
    ["/m", "--hf-token"],
    ["/m", "--trust-remote-code", "--load-format", "dummy"],
    ["/m", "x"],
    ["/m", "--compilation-config.cudagraph_mode", "FULL_DECODE_ONLY"],
    ["/m", "--bogus.key", "1"],
    ["/m", "--no-enable-prefix-caching", "--async-scheduling"],
    ["/m", "--tensor-parallel", "2"],
    ["/m", "--enable-expert", "--data-parallel-size", "2"],
    ["/m", "--port", "8000", "--host", "127.0.0.1"],
    ["/m", "--max-model-len", "4k"],
    ["/m", "--max-model-len", "25.6k"],
    ["/m", "--max-model-len", "1.001k"],
    ["/m", "--max-model-len", "1.5K"],
    ["/m", "--max-model-len", "auto"],
    ["/m", "--max-model-len", "-1"],
    ["/m", "--max-model-len", "1_000"],
    ["/m", "--max-num-batched-tokens", "2k"],
    ["/m", "--max-num-batched-tokens", "2K"],
    ["/m", "--max-num-seqs", "1k"],
    ["/m", "--port", "80"],
    ["/m", "--max-num-seqs", "0"],
    ["/m", "-cc", "{\"cudagraph_mode\": \"FULL_DECODE_ONLY\"}"],
]

SHOWN = (
    "model_tag",
    "max_num_seqs",
    "max_num_batched_tokens",
    "enable_prefix_caching",
    "enforce_eager",
    "tensor_parallel_size",
    "data_parallel_size",
    "optimization_level",
    "cudagraph_capture_sizes",
    "kv_cache_dtype",
    "seed",
    "served_model_name",
    "hf_token",
    "enable_expert_parallel",
    "async_scheduling",
    "max_model_len",
)


def run_sample(parser_factory, words):
    parser = parser_factory()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            namespace = parser.parse_args(list(words))
    except SystemExit:
        lines = err.getvalue().strip().splitlines()
        return {"words": words, "accepted": False, "message": lines[-1] if lines else ""}
    values = {}
    for dest in SHOWN:
        value = getattr(namespace, dest, None)
        default = parser.get_default(dest)
        if value != default:
            values[dest] = value if isinstance(value, (int, str, bool, list)) else str(value)
    mode = getattr(getattr(namespace, "compilation_config", None), "cudagraph_mode", None)
    if mode is not None:
        values["compilation_config.cudagraph_mode"] = getattr(mode, "name", str(mode))
    return {"words": words, "accepted": True, "set": values}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    vllm_src, out = sys.argv[1], sys.argv[2]
    if not os.path.isdir(os.path.join(vllm_src, "vllm")):
        sys.exit(f"error: {vllm_src} holds no vllm package folder")
    parser, vllm_version = serve_parser(vllm_src)
    from vllm.entrypoints.openai.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    flags = []
    for action in parser._actions:
        if not action.option_strings:
            continue
        nargs = action.nargs
        if isinstance(nargs, int) and nargs != 0:
            sys.exit(f"error: {action.option_strings} takes {nargs} values: not a form the format has")
        if nargs not in VALUES:
            sys.exit(f"error: {action.option_strings} takes nargs={nargs!r}: not a form the format has")
        kind = "help" if isinstance(action, argparse._HelpAction) else VALUES[nargs]
        choices = None
        if action.choices is not None and not isinstance(action.choices, dict):
            choices = sorted(str(choice) for choice in action.choices)
        flags.append({"options": list(action.option_strings), "values": kind, "choices": choices})
    # `--attention-backend` takes any text at parse time; AttentionConfig's validator then reads it
    # as a member of this enum, case-insensitively, or "auto" (vllm/config/attention.py).
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    attention_backends = [member.name for member in AttentionBackendEnum]
    samples = [
        run_sample(lambda: make_arg_parser(FlexibleArgumentParser(prog="vllm serve")), words)
        for words in SAMPLES
    ]
    document = {
        "format": "afd-vllm-serve-flags",
        "schema_version": 1,
        "provenance": {
            "vllm_version": vllm_version,
            "python": platform.python_version(),
            "stubbed": list(STUBBED),
            "command": "python3 sim/scripts/vllm_serve_flags.py VLLM_SRC OUT.json",
            "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
        "flags": flags,
        "attention_backends": attention_backends,
        "samples": samples,
    }
    tmp = out + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(document, handle, indent=1)
        handle.write("\n")
    os.replace(tmp, out)
    print(f"{len(flags)} options ({sum(len(f['options']) for f in flags)} spellings), "
          f"{len(samples)} samples -> {out}")


if __name__ == "__main__":
    main()
