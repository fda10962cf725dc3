"""cattn.nn.module — the module base: parameters (registered arrays or
packed weights), sub-modules, state_dict / load_state_dict, skip_init,
ModuleList, and the small argument checks every layer shares. It knows no
layer and no weight format: a packed parameter is any of
packed_params.PACKED, repacked by that module.
"""

import contextvars
import math
from collections import OrderedDict, namedtuple

import numpy as np

from .._validate import FLOAT_DTYPES as _FLOATS
from .._validate import (
    INTP_MAX,
    as_int,
    check_size,
    native,
    physical_memory,
    readable,
    show,
)
from ..ops.gemm import ACTIVATIONS
from .packed_params import PACKED, compute_dtype, repack

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class StateDictKeyError(KeyError):
    """Missing or unexpected keys in load_state_dict (message printed as is)."""

    def __str__(self):
        return str(self.args[0])


# ----------------------------------------------------------------------------
# helpers


class _LazyRng:
    """np.random.default_rng(None), made when first used. Under skip_init
    nothing draws from it, so loading a model never imports numpy.random
    (~5 MiB resident with the OpenSSL library it pulls in)."""

    __slots__ = ("_g",)

    def __init__(self):
        self._g = None

    def __getattr__(self, name):
        if self._g is None:
            self._g = np.random.default_rng()
        return getattr(self._g, name)


def make_rng(seed):
    """np.random.Generator from None, an int, or a Generator (used as is);
    under skip_init with seed None, one made only if something draws."""
    if isinstance(seed, _LazyRng):
        return seed
    if seed is None and _SKIP_INIT.get():
        return _LazyRng()
    return np.random.default_rng(seed)


def positive_int(n, name, owner):
    """n as an int >= 1: TypeError for a non-integer (bool and float
    included), ValueError naming `name` for n < 1."""
    return as_int(n, name, owner, lo=1)


def check_dropout(p, owner):
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise TypeError(f"{owner}: dropout must be a float in [0, 1) (torch's positional order "
                        f"is (..., dropout, bias, ...): pass bias= by keyword), got {show(p)}")
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{owner}: dropout must be in [0, 1), got {show(p)}")
    return float(p)


# per-layer memory besides the parameters (Python objects, dicts), for the
# "does this stack fit in memory" check of the stacks' num_layers
LAYER_OVERHEAD = 16384


def check_stack(owner, n, layer):
    """MemoryError naming num_layers when n copies of `layer` cannot fit in
    physical memory (checked before building them: no minutes-long loop that
    ends in an out-of-memory kill)."""
    per = sum(p.nbytes for p in layer.parameters()) + LAYER_OVERHEAD
    total, ram = n * per, physical_memory()
    if total > INTP_MAX or (ram is not None and total > ram):
        raise MemoryError(f"{owner}: num_layers={show(n)} layers of about {per} bytes each "
                          f"need {show(total)} bytes, more than this machine's memory "
                          f"({ram if ram is not None else INTP_MAX} bytes)")


# True while skip_init builds a module: parameters are allocated, not drawn
_SKIP_INIT = contextvars.ContextVar("cattn_nn_skip_init", default=False)
# counts attribute assignments on every Module (parameters, sub-modules,
# settings): a description built from modules is current while it is unchanged
# (the fast check), or while its own modules' versions are (tree_versions)
_MUTATIONS = [0]


def mutation_count():
    """How many Module attribute assignments this process has made. A
    description built from modules (nn.fastpath, nn.program) is current
    while this count is unchanged, or, once it moved, while
    tree_versions() of its own modules is (in-place edits of a parameter's
    values need no rebuild: the descriptions point at the same arrays)."""
    return _MUTATIONS[0]


def tree_versions(module):
    """The versions of module and of every module under it (depth first): each
    counts the attribute assignments made on that module (parameters,
    sub-modules, settings). Equal tuples: the tree was not changed between."""
    out, stack = [], [module]
    while stack:
        m = stack.pop()
        out.append(m.__dict__.get("_version", 0))
        stack.extend(reversed(m.__dict__["_modules"].values()))
    return tuple(out)


def current(cache, key, build):
    """build(key) as kept in cache (a WeakKeyDictionary of key -> (count,
    versions, value)) while key's modules are unchanged (mutation_count, then
    tree_versions); built again, and kept, otherwise."""
    hit, now = cache.get(key), _MUTATIONS[0]
    if hit is not None:
        if hit[0] == now:
            return hit[2]
        versions = tree_versions(key)
        if hit[1] == versions:
            cache[key] = (now, versions, hit[2])
            return hit[2]
    value = build(key)
    cache[key] = (_MUTATIONS[0], tree_versions(key), value)
    return value


def skip_init(module_cls, *args, **kwargs):
    """module_cls(*args, **kwargs) with its random initial weights allocated
    but not drawn (contents undefined; norms and biases keep their constant
    initial values), as torch.nn.utils.skip_init: for modules whose weights
    are loaded next (load_state_dict), which then skips the random draws."""
    token = _SKIP_INIT.set(True)
    try:
        return module_cls(*args, **kwargs)
    finally:
        _SKIP_INIT.reset(token)


def new_param(owner, what, shape, dtype, make):
    """make() -> the initial array of `shape` (built via float64 random
    numbers): a size NumPy cannot hold raises ValueError, one larger than
    the machine's memory or than what can be allocated MemoryError, both
    naming the module, the parameter and its shape. Under skip_init: an
    uninitialised array."""
    skip = _SKIP_INIT.get()
    check_size(shape, dtype, owner, what, eager=True,
               extra_bytes_per_item=0 if skip else 8)  # + float64 temp
    try:
        return np.empty(shape, dtype) if skip else make()
    except MemoryError as e:
        raise MemoryError(f"{owner}: cannot allocate {what} of shape {tuple(shape)}: {e}") from None


def check_activation(activation, owner):
    if isinstance(activation, str) and activation in ACTIVATIONS:
        return activation
    if callable(activation):
        raise TypeError(f"{owner}: activation must be a string, one of {ACTIVATIONS} (cattn fuses "
                        f"it into the GEMM epilogue); got the callable {activation!r}")
    raise ValueError(f"{owner}: unknown activation {activation!r}; expected one of {ACTIVATIONS}")


def xavier_uniform(rng, shape, dtype, owner="", what="weight"):
    """torch.nn.init.xavier_uniform_ for a 2-D (fan_out, fan_in) weight."""
    def make():  # after the size check: a huge fan would overflow the float bound
        bound = math.sqrt(6.0 / (shape[0] + shape[1])) if shape[0] + shape[1] else 0.0
        return rng.uniform(-bound, bound, size=shape).astype(dtype)
    return new_param(owner, what, shape, dtype, make)


def linear_uniform(rng, shape, fan_in, dtype, owner="", what="weight"):
    """torch nn.Linear's default: kaiming_uniform_(a=sqrt(5)) for the weight and
    uniform(+-1/sqrt(fan_in)) for the bias both reduce to this bound."""
    def make():
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        return rng.uniform(-bound, bound, size=shape).astype(dtype)
    return new_param(owner, what, shape, dtype, make)


def as_input(x, name, dtype, owner):
    """x as an ndarray of the module's dtype (TypeError otherwise); no copy
    unless x is unaligned (then copied once here, not in every op)."""
    if not isinstance(x, np.ndarray):
        x = np.asarray(x)
    if x.dtype != dtype:
        x = native(x)
    if x.dtype != dtype:
        raise TypeError(
            f"{owner}: {name} has dtype {x.dtype} but the module's parameters are {dtype}; "
            f"cast the input (x.astype(np.{dtype.name})) or build the module with dtype=np.{x.dtype.name}"
            if x.dtype in _FLOATS else
            f"{owner}: {name} has dtype {x.dtype}; only float32 and float64 are supported")
    if not x.flags.aligned:
        x = readable(x, dtype)
    return x




class Module:
    """Base class: named NumPy parameters and sub-modules with torch's dotted
    names (`self_attn.out_proj.weight`). Modules are callable (forward)."""

    def __init__(self):
        self.__dict__["_parameters"] = OrderedDict()
        self.__dict__["_modules"] = OrderedDict()

    def register_parameter(self, name, value):
        """Add a parameter (an ndarray, or None for an absent bias)."""
        _MUTATIONS[0] += 1
        self.__dict__["_version"] = self.__dict__.get("_version", 0) + 1
        self._parameters[name] = value
        self.__dict__[name] = value  # mirrored for fast attribute lookup

    def __setattr__(self, name, value):
        _MUTATIONS[0] += 1
        self.__dict__["_version"] = self.__dict__.get("_version", 0) + 1
        params = self.__dict__.get("_parameters")
        if isinstance(value, Module):
            self._modules[name] = value
        elif params is not None and name in params:
            old = params[name]
            if isinstance(value, PACKED):
                if (old is None or value.shape != old.shape
                        or value.compute_dtype != compute_dtype(old)):
                    raise ValueError(f"parameter {name!r}: a packed {value.dtype} weight of shape "
                                     f"{value.shape} cannot replace {show(old)}")
            elif isinstance(old, PACKED) and value is not None:   # packed again, same format
                value = repack(old, coerce_param(name, value, old.shape, old.compute_dtype))
            elif old is not None and value is not None:
                value = coerce_param(name, value, old.shape, old.dtype)
            params[name] = value
        object.__setattr__(self, name, value)  # mirrored in __dict__ for fast lookup

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def children(self):
        return iter(self._modules.values())

    def named_parameters(self, prefix=""):
        """(dotted name, array) for every parameter that is not None, in
        registration order, sub-modules depth first (torch's order). A
        packed weight (quantize, pack_weights) is given as a new array of
        the values the kernels use."""
        for name, p in self._parameters.items():
            if p is not None:
                yield prefix + name, p.unpack() if isinstance(p, PACKED) else p
        for name, m in self._modules.items():
            yield from m.named_parameters(prefix + name + ".")

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def state_dict(self):
        """OrderedDict of torch's names -> parameter arrays. The arrays are the
        module's own (as torch's tensors are): copy them for a snapshot
        (packed weights come as new arrays of their values)."""
        return OrderedDict(self.named_parameters())

    def load_state_dict(self, state_dict, strict=True):
        """Copy arrays into the parameters, by torch's names and shapes.

        Validates everything before writing anything: with strict=True a
        missing or unexpected key raises StateDictKeyError (a KeyError)
        listing them; a wrong shape raises ValueError; a non-float array
        raises TypeError; a float array of another precision is cast to the
        module's dtype (ValueError if a finite value overflows). Accepts
        anything np.asarray understands, e.g. CPU torch tensors.
        Returns (missing_keys, unexpected_keys)."""
        own = OrderedDict(self.named_parameters())
        given = dict(state_dict)
        missing = [k for k in own if k not in given]
        unexpected = [k for k in given if k not in own]
        if strict and (missing or unexpected):
            msg = [f"Error(s) in loading state_dict for {type(self).__name__}:"]
            if missing:
                msg.append("missing key(s): " + ", ".join(missing))
            if unexpected:
                msg.append("unexpected key(s): " + ", ".join(unexpected))
            raise StateDictKeyError("\n  ".join(msg))
        staged = [(k, own[k], coerce_param(k, given[k], own[k].shape, own[k].dtype))
                  for k in own if k in given]
        for k, dst, src in staged:
            *path, attr = k.split(".")
            mod = self
            for p in path:
                mod = mod._modules[p]
            if isinstance(mod._parameters[attr], PACKED):
                setattr(mod, attr, src)                           # packed again
            else:
                dst[...] = src
        return IncompatibleKeys(missing, unexpected)

    def eval(self):
        """No-op (cattn modules are always in inference mode); returns self."""
        return self

    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [f"  ({n}): " + repr(m).replace("\n", "\n  ") for n, m in self._modules.items()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        return head + ("\n" + "\n".join(lines) + "\n)" if lines else ")")


def coerce_param(name, value, shape, dtype):
    """value as an array of `shape` and `dtype`, or a clear error."""
    try:
        arr = np.asarray(value)
    except Exception as e:  # e.g. a bfloat16 torch tensor
        raise TypeError(f"parameter {name!r}: cannot convert {type(value).__name__} "
                        f"to a NumPy array ({e})") from None
    if arr.dtype.kind != "f":
        raise TypeError(f"parameter {name!r} has dtype {arr.dtype}; expected a floating-point "
                        f"array (the module is {dtype})")
    if arr.shape != tuple(shape):
        raise ValueError(f"parameter {name!r} has shape {arr.shape}, expected {tuple(shape)}")
    if arr.dtype == dtype and not arr.flags.aligned:
        arr = readable(arr, dtype)  # realigned once here, not copied by every forward
    if arr.dtype != dtype:
        with np.errstate(over="ignore"):
            cast = arr.astype(dtype)
        if np.any(np.isfinite(arr) & ~np.isfinite(cast)):
            raise ValueError(f"parameter {name!r}: values overflow when cast from {arr.dtype} "
                             f"to the module's dtype {dtype}")
        arr = cast
    return arr


class ModuleList(Module):
    """Sub-modules named "0", "1", ... (torch's `layers.0.`...)."""

    def __init__(self, modules=()):
        super().__init__()
        for i, m in enumerate(modules):
            self._modules[str(i)] = m

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


# ----------------------------------------------------------------------------
# Linear, LayerNorm


