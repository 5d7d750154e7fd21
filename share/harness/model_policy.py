"""The static policy of model_new.py (man/cudaagent-verify.1, PYTHON POLICY).

Reads model_new.py's bytes on stdin and writes one JSON object on stdout:
{"version": ..., "findings": [{"rule", "line", "detail", "tampering"}, ...]} or, when the source
does not compile, {"version": ..., "error": "SyntaxError: ... (line 3)"}. The source is parsed
with ast exactly as the import will compile it (compile() of the same bytes, in the interpreter
that will run it) and is never executed.

Key design choice: everything model_new.py can reach in its own process is reached by name, so
the names decide. The operator audit runs in the candidate's process, and any road to the
interpreter (reflection builtins, private and dunder attributes, frames, sys/gc/ctypes, torch's
dispatch internals, writes to module attributes) could switch it off; those roads are forbidden
here, statically, and a source that names one is tampering (FLAG_HACK). Ordinary forbidden use
(torch compute functions, tensor compute methods, other imports) is REJECT_POLICY. Arithmetic on
tensors (a * b) looks the same as arithmetic on ints: it stays the runtime audit's to catch.
"""

import ast
import builtins
import json
import sys

# Bump with any change of the rules; lib/include/cudaagent/candidate/python_policy.h must match.
POLICY_VERSION = "model-policy-2"
MAX_FINDINGS = 50

# Modules model_new.py may import, as dotted paths (aliases allowed). torch.nn.functional may be
# imported (a habit of generated code) but naming anything in it is a finding.
IMPORTABLE = {"torch", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.cuda", "math",
              "typing", "cuda_extension", "__future__"}
MODULE_PATHS = IMPORTABLE
USABLE_ROOTS = {"torch", "math", "typing", "cuda_extension", "__future__"}
# nn classes that are tensors: subclassing one is subclassing torch.Tensor.
TENSOR_CLASSES = {"torch.Tensor", "torch.nn.Parameter", "torch.nn.Buffer",
                  "torch.nn.UninitializedParameter", "torch.nn.UninitializedBuffer"}
# Modules whose only use in a kernel rewrite is reaching the interpreter, the process or other
# threads: importing one is tampering. Any other module outside IMPORTABLE is REJECT_POLICY.
INTERPRETER_MODULES = {
    "sys", "gc", "inspect", "ctypes", "cffi", "importlib", "imp", "builtins", "threading",
    "multiprocessing", "concurrent", "asyncio", "signal", "types", "weakref", "atexit", "marshal",
    "pickle", "copyreg", "code", "codeop", "dis", "runpy", "pdb", "bdb", "faulthandler",
    "tracemalloc", "traceback", "site", "mmap", "resource", "operator", "zipimport", "pkgutil",
}

# torch.<first part> subtrees that hold the dispatcher, hooks, custom operators and tracing:
# naming one is tampering. torch.utils.cpp_extension is REJECT_POLICY (code built outside the
# verified build), the rest of torch.utils tampering (_python_dispatch, hooks, ...).
TORCH_INTERNALS = {"ops", "library", "overrides", "utils", "autograd", "fx", "multiprocessing",
                   "distributed", "testing", "package", "hub", "func", "export", "compiler",
                   "_dynamo", "_C", "_ops", "_inductor", "_functorch", "_subclasses", "_prims",
                   "_refs", "_decomp", "_higher_order_ops", "_library", "_guards"}
TORCH_ALLOWED = {
    # Allocation and initialisation
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
    "full_like", "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm",
    "arange", "linspace", "eye", "tensor", "as_tensor", "scalar_tensor",
    # Types, devices, layouts
    "dtype", "device", "Size", "Tensor", "Generator", "strided", "contiguous_format",
    "channels_last", "channels_last_3d", "preserve_format", "finfo", "iinfo",
    "float32", "float", "float16", "half", "bfloat16", "float64", "double", "int8", "int16",
    "short", "int32", "int", "int64", "long", "uint8", "bool", "complex64", "complex128",
    "cfloat", "cdouble", "float8_e4m3fn", "float8_e5m2",
    # Queries and grad mode
    "is_tensor", "is_floating_point", "is_complex", "numel", "get_default_dtype",
    "no_grad", "inference_mode", "is_grad_enabled",
    # Seeding (the reference's seeds are private) and the float32 matmul precision (the same as
    # the TF32 switches below)
    "manual_seed", "set_float32_matmul_precision", "get_float32_matmul_precision",
}
# torch.backends switches that only choose among the candidate's own cuDNN/cuBLAS algorithms (what
# its C++ could choose itself): they may be read and set. Any other torch.backends name is
# REJECT_POLICY.
BACKEND_SWITCHES = {"torch.backends.cudnn.benchmark", "torch.backends.cudnn.deterministic",
                    "torch.backends.cudnn.allow_tf32", "torch.backends.cuda.matmul.allow_tf32"}
# typing's names for annotations (get_type_hints would evaluate strings as code).
TYPING_ALLOWED = {"Any", "Callable", "Dict", "Iterable", "Iterator", "List", "Literal", "Mapping",
                  "Optional", "Sequence", "Set", "Tuple", "Type", "Union", "TYPE_CHECKING", "Final",
                  "cast"}
# nn classes that run the module they wrap in other threads, outside the operator audit.
THREADED_NN = {"DataParallel", "DistributedDataParallel"}
# torch.autograd.Function: the one part of torch.autograd an honest wrapper of a kernel uses (its
# forward runs under the audit like any call; without gradients, backward never runs).
AUTOGRAD_FUNCTION = "torch.autograd.Function"
# Private helpers that nn.Linear's and nn.Conv's own initialisation uses, which honest constructors
# copy; they only read shapes.
ALLOWED_PRIVATE_PATHS = {"torch.nn.init._calculate_fan_in_and_fan_out",
                         "torch.nn.init._calculate_correct_fan"}
TORCH_CUDA_ALLOWED = {"current_stream", "default_stream", "synchronize", "is_available",
                      "current_device", "device_count", "get_device_properties",
                      "get_device_capability", "get_device_name", "Stream", "Event", "stream",
                      "device", "manual_seed", "manual_seed_all", "empty_cache"}

# Tensor methods that hand a tensor's values (or its storage) to Python without a dispatched
# operator, so neither the audit's read count nor its compute check sees them (.item() is a
# dispatched read, which the audit counts). Refused on anything but self, even where the
# candidate's own classes define a name like them.
VALUE_READERS = {"tolist", "numpy", "apply_", "map_", "map2_", "storage", "untyped_storage"}

# Attributes and methods allowed on any object that is not a module or self: tensor views, shape
# and type queries, moves and conversions, data access for the extension, initialisation fills,
# the fields of nn layers, stream and device properties, and a few container methods.
ALLOWED_ATTRIBUTES = {
    # tensor views and shapes
    "view", "view_as", "reshape", "reshape_as", "expand", "expand_as", "permute", "transpose",
    "t", "T", "mT", "squeeze", "unsqueeze", "flatten", "unflatten", "narrow", "select", "split",
    "chunk", "unbind", "as_strided", "contiguous", "is_contiguous", "size", "shape", "dim",
    "ndim", "ndimension", "numel", "nelement", "stride", "storage_offset", "element_size",
    "itemsize", "nbytes",
    # types, devices, moves, conversions, data access
    "dtype", "device", "is_cuda", "is_cpu", "layout", "data_ptr", "data", "detach", "clone",
    "to", "cuda", "cpu", "float", "half", "double", "bfloat16", "int", "long", "bool", "short",
    "byte", "char", "type_as", "item", "is_floating_point", "is_complex", "get_device",
    "record_stream", "requires_grad", "requires_grad_", "is_leaf", "grad",
    "new_empty", "new_empty_strided", "new_zeros", "new_ones", "new_full", "new_tensor",
    # fills (allocation and parameter initialisation)
    "fill_", "zero_", "copy_", "uniform_", "normal_",
    # nn layers' parameters and settings
    "weight", "bias", "in_features", "out_features", "in_channels", "out_channels",
    "kernel_size", "stride", "padding", "dilation", "groups", "output_padding", "padding_mode",
    "transposed", "eps", "momentum", "affine", "track_running_stats", "running_mean",
    "running_var", "num_batches_tracked", "normalized_shape", "elementwise_affine",
    "num_features", "num_groups", "num_channels", "num_embeddings", "embedding_dim",
    "padding_idx", "negative_slope", "inplace", "p", "beta", "threshold", "min_val", "max_val",
    "upscale_factor", "scale_factor", "mode", "align_corners", "output_size", "return_indices",
    "ceil_mode", "count_include_pad", "divisor_override", "embed_dim", "num_heads", "head_dim",
    "batch_first", "in_proj_weight", "in_proj_bias", "out_proj", "hidden_size", "num_layers",
    "bidirectional", "training",
    # nn.Module methods that change nothing the harness relies on
    "parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children",
    "modules", "named_modules", "register_buffer", "register_parameter", "add_module", "eval",
    "train",
    # streams, events, devices, dtype and finfo fields
    "cuda_stream", "wait_stream", "wait_event", "record", "synchronize", "query",
    "multi_processor_count", "total_memory", "major", "minor", "name", "index", "type",
    "is_signed", "bits", "tiny", "resolution",
    # torch.autograd.Function's use and its context
    "apply", "save_for_backward", "saved_tensors", "needs_input_grad", "mark_non_differentiable",
    "set_materialize_grads",
    # lists, dicts, strings
    "append", "extend", "insert", "pop", "keys", "values", "items", "get", "update",
    "setdefault", "count", "join", "startswith", "endswith", "lower", "upper", "strip",
}
# Attributes of frames, tracebacks, generators, coroutines, code and functions: the roads from any
# object to the interpreter's state. Tampering wherever they appear.
INTERPRETER_ATTRIBUTES = {
    "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "f_trace", "f_lasti", "f_lineno",
    "tb_frame", "tb_next", "tb_lasti", "tb_lineno", "gi_frame", "gi_code", "gi_yieldfrom",
    "gi_running", "cr_frame", "cr_code", "cr_await", "cr_running", "ag_frame", "ag_code",
    "ag_await", "co_code", "co_consts", "co_names", "co_varnames", "func_globals", "func_code",
    "func_closure", "im_func", "im_self", "cell_contents", "mro", "with_traceback",
}
# nn.Module internals a method or attribute of the candidate's own may not replace or reach.
MODULE_INTERNALS = {
    "_parameters", "_buffers", "_modules", "_non_persistent_buffers_set", "_apply", "_call_impl",
    "_wrapped_call_impl", "_compiled_call_impl", "_load_from_state_dict", "_save_to_state_dict",
    "_named_members", "_get_name", "_slow_forward", "_version", "_replicate_for_data_parallel",
    "_register_state_dict_hook", "_register_load_state_dict_pre_hook",
}
# nn.Module's public methods that the harness calls or that change what it reads: a class of
# the candidate's may not define them.
MODULE_API = {
    "__call__", "load_state_dict", "state_dict", "to", "cuda", "cpu", "apply", "register_buffer",
    "register_parameter", "add_module", "register_module", "parameters", "named_parameters",
    "buffers", "named_buffers", "modules", "named_modules", "children", "named_children",
    "train", "eval", "float", "half", "double", "bfloat16", "type", "requires_grad_",
    "zero_grad", "get_submodule", "get_parameter", "get_buffer", "set_extra_state",
    "get_extra_state",
}

ALLOWED_BUILTINS = {
    "abs", "all", "any", "bool", "dict", "divmod", "enumerate", "filter", "float", "frozenset",
    "int", "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next",
    "print", "range", "reversed", "round", "set", "slice", "sorted", "str", "sum", "tuple", "zip",
    "super", "callable", "repr", "chr", "ord", "pow", "complex", "object", "property",
    "staticmethod", "classmethod", "type", "NotImplemented", "Ellipsis", "None", "True", "False",
    "Exception", "ValueError", "RuntimeError", "TypeError", "NotImplementedError",
    "AssertionError", "IndexError", "KeyError", "LookupError", "ZeroDivisionError",
    "ArithmeticError", "OverflowError", "AttributeError", "StopIteration",
}
# Builtins that read or write attributes by name, run source, reach the interpreter's namespaces,
# files or raw memory, or leave the harness: tampering. Other builtins are REJECT_POLICY.
TAMPERING_BUILTINS = {}
for names, why in (
        ("getattr setattr delattr hasattr", "reaches attributes by a name computed at run time"),
        ("eval exec compile __import__ __build_class__", "runs or imports code chosen at run time"),
        ("globals locals vars dir __builtins__ __loader__ __spec__", "reads the interpreter's namespaces"),
        ("open", "opens files (the reference's data, /proc)"),
        ("memoryview", "reads raw memory"),
        ("exit quit SystemExit KeyboardInterrupt GeneratorExit BaseException",
         "leaves the harness outside its error handling"),
        ("breakpoint help copyright credits license", "starts interactive machinery")):
    TAMPERING_BUILTINS.update(dict.fromkeys(names.split(), why))
# Dunder names that are plain values.
HARMLESS_DUNDER_NAMES = {"__name__", "__doc__", "__file__", "__debug__"}
ALLOWED_DUNDER_METHODS = {"__init__", "__repr__", "__str__"}
DECORATOR_PATHS = {"staticmethod", "classmethod", "property", "torch.no_grad",
                   "torch.inference_mode"}
BUILTIN_NAMES = set(dir(builtins))


def is_dunder(name):
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def judge_path(path):
    """For a dotted name reached through an import: None if allowed, else (rule, why, tampering)."""
    parts = path.split(".")
    root = parts[0]
    if len(parts) > 2 and parts[-1] == "__init__" and path not in MODULE_PATHS:
        return judge_path(".".join(parts[:-1]))  # Base.__init__(self): the class decides
    if path in ALLOWED_PRIVATE_PATHS:
        return None
    private = any(part.startswith("_") for part in parts[1:])
    if private or root.startswith("_") and root != "__future__":
        return ("python-private-access", f"{path} is private to its module", True)
    if root in ("math", "cuda_extension", "__future__"):
        return None
    if root == "typing":
        if len(parts) == 1 or len(parts) == 2 and parts[1] in TYPING_ALLOWED:
            return None
        if parts[1] in ("get_type_hints", "ForwardRef"):
            return ("python-reflection", f"{path} evaluates strings as code", True)
        return ("python-attribute", f"{path}: only type annotations may be used from typing", False)
    if root != "torch":
        return ("python-import", f"{path}: only torch, math, typing and cuda_extension may be used",
                root in INTERPRETER_MODULES)
    if len(parts) == 1:
        return None
    first = parts[1]
    if any("hook" in part for part in parts[1:]):
        return ("python-torch-internals", f"{path} installs hooks", True)
    if first == "utils" and len(parts) > 2 and parts[2] == "cpp_extension":
        return ("python-torch-api", f"{path} builds code outside the verified build", False)
    if path == AUTOGRAD_FUNCTION:
        return None
    if first in TORCH_INTERNALS:
        return ("python-torch-internals",
                f"{path} reaches torch's dispatcher or interpreter internals", True)
    if len(parts) == 2 and first in TORCH_ALLOWED or path in BACKEND_SWITCHES:
        return None
    if first == "cuda" and (len(parts) == 2 or len(parts) == 3 and parts[2] in TORCH_CUDA_ALLOWED):
        return None
    if first == "nn":
        if len(parts) == 2:
            return None
        second = parts[2]
        if second == "functional":
            if len(parts) == 3:
                return None  # the module itself; naming anything in it is the finding
            return ("python-torch-api",
                    f"{path} computes with torch; only the candidate's own kernels may compute", False)
        if second == "init" and len(parts) <= 4:
            return None
        if second in THREADED_NN:
            return ("python-torch-internals", f"{path} runs modules in other threads", True)
        if second[:1].isupper() and len(parts) == 3:
            return None
        return ("python-torch-api", f"{path} is not on the allow-list of torch.nn", False)
    if first.startswith(("set_", "use_")) or first == "backends":
        return ("python-torch-api", f"{path} changes torch's global state", False)
    return ("python-torch-api",
            f"{path} is not on the allow-list (allocation, types, devices, grad mode)", False)


class Scope:
    def __init__(self, kind, bound=(), self_name=None):
        self.kind = kind          # "module", "class", "function", "comprehension"
        self.bound = set(bound)   # names bound in this scope (functions: anywhere in the body)
        self.self_name = self_name


def bound_in_function(node):
    """Names a function (or lambda) binds: parameters and every binding in its own body, not in
    nested functions, classes or comprehensions (walrus targets in comprehensions bind here)."""
    names, declared = set(), set()
    args = node.args
    for arg in args.posonlyargs + args.args + args.kwonlyargs:
        names.add(arg.arg)
    for arg in (args.vararg, args.kwarg):
        if arg is not None:
            names.add(arg.arg)
    body = node.body if isinstance(node.body, list) else [node.body]
    stack = list(body)
    while stack:
        item = stack.pop()
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(item.name)
            stack.extend(item.decorator_list)
            if not isinstance(item, ast.ClassDef):
                stack.extend(item.args.defaults + [d for d in item.args.kw_defaults if d])
            else:
                stack.extend(item.bases + [k.value for k in item.keywords])
            continue
        if isinstance(item, ast.Lambda):
            stack.extend(item.args.defaults + [d for d in item.args.kw_defaults if d])
            continue
        if isinstance(item, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            for sub in ast.walk(item):
                if isinstance(sub, ast.NamedExpr) and isinstance(sub.target, ast.Name):
                    names.add(sub.target.id)
            stack.append(item.generators[0].iter)
            continue
        if isinstance(item, ast.Name) and not isinstance(item.ctx, ast.Load):
            names.add(item.id)
        elif isinstance(item, (ast.Import, ast.ImportFrom)):
            for alias in item.names:
                names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(item, ast.ExceptHandler) and item.name:
            names.add(item.name)
        elif isinstance(item, (ast.Global, ast.Nonlocal)):
            declared.update(item.names)
        stack.extend(ast.iter_child_nodes(item))
    return names - declared


class Checker:
    def __init__(self):
        self.findings = []
        self.aliases = {}        # module-level import alias -> dotted path
        self.user_private = set()  # _names the candidate's classes define themselves
        self.user_public = set()   # public attribute names the candidate's code defines
        self.user_classes = set()
        self.scopes = [Scope("module")]

    # --- findings -------------------------------------------------------------------------
    def find(self, node, rule, detail, tampering):
        if len(self.findings) < MAX_FINDINGS:
            self.findings.append({"rule": rule, "line": getattr(node, "lineno", 0),
                                  "detail": detail, "tampering": bool(tampering)})

    def hack(self, node, rule, detail):
        """A finding that is tampering: FLAG_HACK."""
        self.find(node, rule, detail, True)

    def refuse(self, node, rule, detail):
        """A finding that is ordinary forbidden use: REJECT_POLICY."""
        self.find(node, rule, detail, False)

    # --- the first pass: imports and the names the candidate defines ------------------------
    def collect(self, tree):
        """The candidate's own classes and the attributes they define: methods, class-level names
        and what methods assign on their self."""
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            self.user_classes.add(node.name)
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.define_attribute(item.name)
                    params = item.args.posonlyargs + item.args.args
                    if not params:
                        continue
                    for sub in ast.walk(item):
                        if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store) \
                                and isinstance(sub.value, ast.Name) and sub.value.id == params[0].arg:
                            self.define_attribute(sub.attr)
                for target in getattr(item, "targets", [getattr(item, "target", None)]):
                    if isinstance(target, ast.Name):
                        self.define_attribute(target.id)
        for node in tree.body:
            self.collect_imports(node)

    def define_attribute(self, name):
        if name.startswith("_") and not is_dunder(name):
            self.user_private.add(name)
        elif not name.startswith("_"):
            self.user_public.add(name)

    def collect_imports(self, node):
        """Module-level imports (also inside module-level if/try) bind aliases."""
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if isinstance(node, ast.Import):
                    local = alias.asname or alias.name.split(".")[0]
                    path = alias.name if alias.asname else alias.name.split(".")[0]
                elif node.module and not node.level:
                    local, path = alias.asname or alias.name, f"{node.module}.{alias.name}"
                else:
                    continue
                if self.aliases.get(local, path) != path:
                    self.refuse(node, "python-rebind", f"'{local}' names two different imports")
                if local in BUILTIN_NAMES:
                    # An import that may not run (inside if/try) would leave the builtin in place.
                    self.find(node, "python-rebind", f"'{local}' imported under a builtin's name",
                              local in TAMPERING_BUILTINS)
                self.aliases[local] = path
        elif isinstance(node, (ast.If, ast.Try)) or type(node).__name__ == "TryStar":
            for field in ("body", "orelse", "finalbody"):
                for child in getattr(node, field, []):
                    self.collect_imports(child)
            for handler in getattr(node, "handlers", []):
                for child in handler.body:
                    self.collect_imports(child)

    # --- names ----------------------------------------------------------------------------
    def locally_bound(self, name):
        """Whether `name` is a local of an enclosing function or comprehension: then it never
        falls back to a builtin (unassigned, it raises). Module and class bindings may be
        skipped at run time, so they do not count."""
        return any(s.kind in ("function", "comprehension") and name in s.bound for s in self.scopes)

    def self_like(self, name):
        """Whether `name` is the first parameter of the method we are in (or an enclosing one)."""
        for scope in reversed(self.scopes):
            if scope.kind in ("function", "comprehension") and name in scope.bound:
                return scope.self_name == name
        return False

    def check_name_load(self, node):
        name = node.id
        if self.locally_bound(name):
            return
        if name in self.aliases:
            path = self.aliases[name]
            if path.split(".")[0] not in USABLE_ROOTS:
                return  # its import is the finding
            verdict = judge_path(path)
            if verdict:
                self.find(node, *verdict)
            elif path in MODULE_PATHS:
                self.find(node, "python-module-value",
                          f"the module {path} is used as a value; use it by name only ({name}.x)", False)
            return
        if name in TAMPERING_BUILTINS:
            self.hack(node, "python-reflection", f"{name} {TAMPERING_BUILTINS[name]}")
        elif is_dunder(name) and name not in HARMLESS_DUNDER_NAMES:
            self.hack(node, "python-private-access", f"{name} reaches the interpreter's internals")
        elif name in BUILTIN_NAMES and name not in ALLOWED_BUILTINS:
            self.refuse(node, "python-builtin", f"the builtin {name} is not on the allow-list")

    def check_binding(self, node, name):
        if is_dunder(name) and self.scopes[-1].kind != "class":  # class-level ones: visit_ClassDef
            self.hack(node, "python-private-access", f"{name} is assigned")
        elif name in self.aliases:
            self.refuse(node, "python-rebind", f"'{name}' rebinds an imported module's name")
        elif self.scopes[-1].kind in ("module", "class") and name in BUILTIN_NAMES:
            # A module or class binding may be skipped at run time, leaving the builtin in place
            # while the checker would resolve the name to the binding.
            self.find(node, "python-rebind",
                      f"'{name}' shadows a builtin at module or class level", name in TAMPERING_BUILTINS)
        for scope in reversed(self.scopes):
            if scope.kind == "function" and scope.self_name == name:
                self.refuse(node, "python-rebind", f"'{name}' (the method's self) is rebound")
            if scope.kind in ("function", "comprehension") and name in scope.bound:
                break

    # --- attributes -----------------------------------------------------------------------
    def check_attribute(self, node, name, base_kind, called, writing):
        """One attribute `name` on a base that is self ("self"), super() ("super") or anything
        else ("object")."""
        if name == "__init__" and called:
            return  # super().__init__(...), Base.__init__(self, ...)
        if name in INTERPRETER_ATTRIBUTES:
            return self.hack(node, "python-private-access", f".{name} reaches the interpreter's state")
        if is_dunder(name):
            return self.hack(node, "python-private-access", f".{name} reaches the interpreter's internals")
        if base_kind == "super":
            return self.refuse(node, "python-attribute", f"super().{name}: only super().__init__ may be used")
        if name.startswith("_"):
            if base_kind == "self" and name in self.user_private and name not in MODULE_INTERNALS \
                    and "hook" not in name:
                return
            return self.hack(node, "python-private-access", f".{name} is private (not the candidate's own)")
        if "hook" in name:
            return self.refuse(node, "python-attribute", f".{name}: hooks are not allowed")
        if base_kind == "self" and writing and name in MODULE_API:
            return self.find(node, "python-class", f"self.{name} is assigned: it replaces nn.Module.{name}, "
                             "which the harness calls", False)
        if base_kind != "self" and name in VALUE_READERS:
            return self.refuse(node, "python-value-read", f".{name} hands a tensor's values to Python, "
                               "where computing with them is beyond the operator audit; compute "
                               "belongs in the candidate's kernels")
        if base_kind == "self" or name in ALLOWED_ATTRIBUTES or name in self.user_public:
            return
        verb = "assigned" if writing else "used"
        self.find(node, "python-attribute", f".{name} is {verb} on an object that is not the candidate's "
                  "own: it is not on the allow-list (tensor views, shapes, types, moves; compute "
                  "belongs in the candidate's kernels)", False)

    def attribute_chain(self, node):
        attrs = []
        while isinstance(node, ast.Attribute):
            attrs.append(node.attr)
            node = node.value
        attrs.reverse()
        return node, attrs

    def visit_attribute(self, node, called=False):
        base, attrs = self.attribute_chain(node)
        writing = not isinstance(node.ctx, ast.Load)
        if isinstance(base, ast.Name) and base.id in self.aliases and not self.locally_bound(base.id):
            path = ".".join([self.aliases[base.id]] + attrs)
            if writing and path in BACKEND_SWITCHES:
                return
            if writing and path.startswith("torch.backends."):
                return self.refuse(node, "python-torch-api", f"{path} is assigned: model_new.py may "
                                   "not change torch's global settings")
            if writing:  # any module's, the harness's own imports (json, ...) included
                return self.hack(node, "python-monkeypatch", f"{path} is assigned or deleted: "
                                 "model_new.py may not change modules")
            if path.split(".")[0] not in USABLE_ROOTS:
                return  # its import is the finding
            verdict = judge_path(path)
            if verdict:
                return self.find(node, *verdict)
            if path in MODULE_PATHS - {"torch.nn.functional"}:
                return self.refuse(node, "python-module-value", f"the module {path} is used as a value")
            return
        if isinstance(base, ast.Name) and self.self_like(base.id):
            kinds = ["self"] + ["object"] * (len(attrs) - 1)
        elif isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super" \
                and not self.locally_bound("super"):
            kinds = ["super"] + ["object"] * (len(attrs) - 1)
            for arg in base.args:
                self.visit(arg)
        else:
            kinds = ["object"] * len(attrs)
            self.visit(base)
        for index, (name, kind) in enumerate(zip(attrs, kinds)):
            last = index == len(attrs) - 1
            self.check_attribute(node, name, kind, called and last, writing and last)

    # --- the walk -------------------------------------------------------------------------
    def visit(self, node):
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is not None:
            return method(node)
        return self.generic(node)

    def generic(self, node):
        for child in ast.iter_child_nodes(node):
            self.visit(child)

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load):
            self.check_name_load(node)
        else:
            self.check_binding(node, node.id)

    def visit_Attribute(self, node):
        self.visit_attribute(node)

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Attribute):
            self.visit_attribute(func, called=True)
        else:
            self.visit(func)
        if isinstance(func, ast.Name) and func.id == "type" and not self.locally_bound("type") \
                and len(node.args) != 1:
            self.hack(node, "python-reflection", "type() with three arguments makes a class at run time")
        if isinstance(func, ast.Call) and isinstance(func.func, ast.Name) and func.func.id == "type":
            self.hack(node, "python-reflection", "type(x)(...) makes an object of a class found at run time")
        for arg in node.args:
            self.visit(arg)
        for keyword in node.keywords:
            self.visit(keyword.value)

    def visit_Import(self, node):
        self.check_import_position(node)
        for alias in node.names:
            self.check_import_path(node, alias.name)

    def visit_ImportFrom(self, node):
        self.check_import_position(node)
        if node.level:
            return self.refuse(node, "python-import", "relative imports are not allowed")
        if any(alias.name == "*" for alias in node.names):
            return self.refuse(node, "python-import", f"from {node.module} import *: name what you use")
        if not self.check_import_path(node, node.module):
            return
        for alias in node.names:
            path = f"{node.module}.{alias.name}"
            if path in IMPORTABLE or node.module == "__future__":
                continue
            verdict = judge_path(path)
            if verdict:
                self.find(node, *verdict)

    def check_import_position(self, node):
        if any(scope.kind != "module" for scope in self.scopes):
            self.refuse(node, "python-import", "imports belong at the top level of model_new.py")

    def check_import_path(self, node, path):
        """Whether `path` may be imported; a finding when not."""
        root = path.split(".")[0]
        if path in IMPORTABLE:
            return True
        if root == "torch":
            verdict = judge_path(path) or ("python-torch-api", f"import {path}: not an allowed module", False)
            self.find(node, *verdict)
        elif root in INTERPRETER_MODULES or root.startswith("_"):
            self.find(node, "python-import", f"import {path}: {root} reaches the interpreter, the "
                      "process or other threads", True)
        else:
            self.find(node, "python-import", f"import {path}: only torch, torch.nn, math, typing and "
                      "cuda_extension may be imported", False)
        return False

    def visit_If(self, node):
        # The body of `if __name__ == "__main__":` never runs: the harness imports model_new.py
        # as model_new, and __name__ cannot be rebound without a finding. Generated code often
        # keeps a self-test there (torch.allclose, a reference model), which is not judged.
        test = node.test
        if self.scopes[-1].kind == "module" and isinstance(test, ast.Compare) \
                and isinstance(test.left, ast.Name) and test.left.id == "__name__" \
                and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq) \
                and isinstance(test.comparators[0], ast.Constant) \
                and test.comparators[0].value == "__main__":
            for statement in node.orelse:
                self.visit(statement)
            return
        self.generic(node)

    def visit_Global(self, node):
        names = ", ".join(node.names)
        tampering = any(n in self.aliases or n in BUILTIN_NAMES for n in node.names)
        self.find(node, "python-monkeypatch" if tampering else "python-syntax",
                  f"global {names}: model_new.py may not rebind module-level names from a function", tampering)

    def visit_Nonlocal(self, node):
        self.refuse(node, "python-syntax", f"nonlocal {', '.join(node.names)} is not allowed")

    def forbid_syntax(self, node):
        self.refuse(node, "python-syntax", f"{type(node).__name__} is not allowed in model_new.py")
        self.generic(node)

    visit_AsyncFunctionDef = visit_Await = visit_AsyncFor = visit_AsyncWith = forbid_syntax
    visit_Yield = visit_YieldFrom = visit_Match = visit_TypeAlias = forbid_syntax

    def visit_arguments(self, node):
        for default in node.defaults + [d for d in node.kw_defaults if d is not None]:
            self.visit(default)
        for arg in node.posonlyargs + node.args + node.kwonlyargs + [node.vararg, node.kwarg]:
            if arg is not None and arg.annotation is not None:
                self.visit(arg.annotation)

    def check_arguments_binding(self, node):
        for arg in node.args.posonlyargs + node.args.args + node.args.kwonlyargs + \
                [node.args.vararg, node.args.kwarg]:
            if arg is not None:
                if arg.arg in self.aliases:
                    self.refuse(node, "python-rebind",
                                f"the parameter '{arg.arg}' rebinds an imported module's name")
                elif is_dunder(arg.arg):
                    self.hack(node, "python-private-access", f"the parameter {arg.arg}")

    def visit_FunctionDef(self, node):
        in_class = self.scopes[-1].kind == "class"
        for decorator in node.decorator_list:
            self.check_decorator(decorator)
            self.visit(decorator)
        self.visit_arguments(node.args)
        if node.returns is not None:
            self.visit(node.returns)
        if in_class:
            self.check_method_name(node)
        else:
            self.check_binding(node, node.name)
        self.check_arguments_binding(node)
        static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
        params = node.args.posonlyargs + node.args.args
        self_name = params[0].arg if in_class and params and not static else None
        self.scopes.append(Scope("function", bound_in_function(node), self_name))
        for statement in node.body:
            self.visit(statement)
        self.scopes.pop()

    def visit_Lambda(self, node):
        self.visit_arguments(node.args)
        self.check_arguments_binding(node)
        self.scopes.append(Scope("function", bound_in_function(node)))
        self.visit(node.body)
        self.scopes.pop()

    def check_method_name(self, node):
        name = node.name
        if is_dunder(name) and name not in ALLOWED_DUNDER_METHODS:
            self.find(node, "python-hook-definition", f"a class defines {name}, which Python or torch "
                      "calls behind the harness's back", True)
        elif name in MODULE_INTERNALS or name.startswith("_") and "hook" in name:
            self.hack(node, "python-hook-definition", f"a class replaces nn.Module's {name}")
        elif name in MODULE_API:
            self.refuse(node, "python-class", f"a class overrides nn.Module.{name}, which the harness calls")

    def check_decorator(self, decorator):
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        base, attrs = self.attribute_chain(target)
        if isinstance(base, ast.Name):
            root = self.aliases.get(base.id, base.id)
            if ".".join([root] + attrs) in DECORATOR_PATHS:
                return
        self.find(decorator, "python-decorator", "decorators other than staticmethod, classmethod, "
                  "property, torch.no_grad and torch.inference_mode are not allowed", False)

    def visit_ClassDef(self, node):
        for decorator in node.decorator_list:
            self.check_decorator(decorator)
            self.visit(decorator)
        if node.keywords:
            self.find(node, "python-hook-definition", f"class {node.name} passes class keywords "
                      "(a metaclass or __init_subclass__ arguments)", True)
        for base in node.bases:
            self.check_base(node, base)
        self.check_binding(node, node.name)
        self.scopes.append(Scope("class"))
        for statement in node.body:
            if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = getattr(statement, "targets", None) or [statement.target]
                for target in targets:
                    if isinstance(target, ast.Name) and is_dunder(target.id):
                        self.find(target, "python-hook-definition",
                                  f"class {node.name} sets {target.id}", True)
            self.visit(statement)
        self.scopes.pop()

    def check_base(self, node, base):
        target, attrs = self.attribute_chain(base)
        if isinstance(target, ast.Name) and not attrs and target.id in self.user_classes:
            return
        if isinstance(target, ast.Name) and not attrs and target.id == "object":
            return
        if isinstance(target, ast.Name) and target.id in self.aliases:
            path = ".".join([self.aliases[target.id]] + attrs)
            parts = path.split(".")
            if path in TENSOR_CLASSES:
                return self.find(node, "python-hook-definition", f"class {node.name} subclasses "
                                 f"{path}, a tensor class (the __torch_function__ machinery)", True)
            if len(parts) == 3 and parts[:2] == ["torch", "nn"] and parts[2][:1].isupper() \
                    or path == AUTOGRAD_FUNCTION:
                return
        self.visit(base)
        self.find(node, "python-class", f"class {node.name}: bases must be nn.Module, an nn layer "
                  "or the candidate's own classes", False)

    def comprehension(self, node, parts):
        generators = node.generators
        self.visit(generators[0].iter)
        bound = set()
        for generator in generators:
            for sub in ast.walk(generator.target):
                if isinstance(sub, ast.Name):
                    bound.add(sub.id)
        self.scopes.append(Scope("comprehension", bound))
        for index, generator in enumerate(generators):
            self.visit(generator.target)
            if index:
                self.visit(generator.iter)
            for condition in generator.ifs:
                self.visit(condition)
        for part in parts:
            self.visit(part)
        self.scopes.pop()

    def visit_ListComp(self, node):
        self.comprehension(node, [node.elt])

    visit_SetComp = visit_GeneratorExp = visit_ListComp

    def visit_DictComp(self, node):
        self.comprehension(node, [node.key, node.value])

    def visit_NamedExpr(self, node):
        self.visit(node.value)
        self.check_binding(node.target, node.target.id)

    def visit_ExceptHandler(self, node):
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self.check_binding(node, node.name)
        for statement in node.body:
            self.visit(statement)


def check(source):
    """The findings for `source` (bytes), or raises SyntaxError/ValueError when it does not compile."""
    tree = ast.parse(source, "model_new.py")
    checker = Checker()
    checker.collect(tree)
    try:
        for statement in tree.body:
            checker.visit(statement)
    except RecursionError:
        checker.find(tree, "python-syntax", "model_new.py is nested too deeply to be checked", False)
    return checker.findings


def main():
    sys.setrecursionlimit(10000)
    source = sys.stdin.buffer.read()
    answer = {"version": POLICY_VERSION}
    try:
        answer["findings"] = check(source)
    except (SyntaxError, ValueError) as error:
        line = getattr(error, "lineno", None)
        answer["error"] = f"{type(error).__name__}: {getattr(error, 'msg', None) or error}" + \
            (f" (line {line})" if line else "")
    except (RecursionError, MemoryError) as error:
        answer["findings"] = [{"rule": "python-syntax", "line": 0, "tampering": False,
                               "detail": f"model_new.py cannot be checked ({type(error).__name__})"}]
    sys.stdout.write(json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
