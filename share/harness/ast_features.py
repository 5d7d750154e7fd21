"""Normalised AST tokens for cudaagent-dedup (man/cudaagent-dedup.1, SIMILARITY).

Reads one JSON string per line on stdin (a module's source text) and writes one JSON object per
line on stdout, after a first line {"version": ...}: {"tokens": "...", "ops": "..."} (both
space-separated) or {"error": "reason"}. The source is parsed with ast and never executed, so any
python3 >= 3.8 serves, torch or not.

Key design choice: user names and literal values are erased (renaming a variable or changing a
shape leaves the tokens alone), while what the task computes is kept: names that resolve through
an import (nn.Conv2d -> torch.nn.Conv2d), builtins, attribute names on anything but `self`, and
keyword-argument names. "tokens" is the whole module in preorder; "ops" are the API names and
attribute names the model itself uses (inside classes and functions, but not in KernelBench's
input functions get_inputs and get_init_inputs), i.e. its op composition. One traversal; names are
resolved at the end, once every binding in the module is known.
"""

import ast
import builtins
import json
import sys

# Bump with any change to the output; lib/include/cudaagent/dedup/features.h must match it.
TOKENS_VERSION = "ast-tokens-1"

BUILTIN_NAMES = frozenset(dir(builtins))
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
INPUT_FUNCTIONS = frozenset({"get_inputs", "get_init_inputs"})


def is_docstring(statement):
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str))


def is_number(node):
    """-1, 2.5, (3, 5), [[1, 2], [3, 4]]: numbers, signed or nested in tuples and lists."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    if isinstance(node, (ast.Tuple, ast.List)):
        return bool(node.elts) and all(is_number(e) for e in node.elts)
    return (isinstance(node, ast.Constant) and not isinstance(node.value, bool)
            and isinstance(node.value, (int, float, complex)))


def is_op(token):
    """API names and attribute names, but not `self`'s attributes or protocol names (__init__)."""
    if token.startswith("api:"):
        return True
    return token.startswith("Attr:") and token != "Attr:_" and not token.endswith("__")


class Tokens:
    """Preorder node-type tokens. Names and attribute chains on a name stay (root, attrs, in_model)
    tuples until resolve(); in_model says whether they count as ops."""

    def __init__(self):
        self.out = []
        self.ops = []         # ops known at once: attribute names on expressions, not names
        self.in_model = False
        self.imports = {}     # local name -> dotted path it was imported as
        self.user = set()     # names the module binds itself
        self.selves = set()   # first parameters of methods
        self.handlers = {
            ast.Name: self.name, ast.Attribute: self.attribute, ast.Constant: self.constant,
            ast.keyword: self.keyword, ast.arg: self.arg, ast.FunctionDef: self.function,
            ast.AsyncFunctionDef: self.function, ast.ClassDef: self.class_def,
            ast.AnnAssign: self.ann_assign, ast.Import: self.import_,
            ast.ImportFrom: self.import_from, ast.Module: self.module,
            ast.ExceptHandler: self.handler, ast.Global: self.scope_names,
            ast.Nonlocal: self.scope_names, ast.Tuple: self.number_literal,
            ast.List: self.number_literal, ast.UnaryOp: self.number_literal,
        }

    def visit(self, node):
        handler = self.handlers.get(type(node))
        if handler is not None:
            handler(node)
        elif isinstance(node, ast.expr_context):
            pass
        elif type(node).__name__ == "Index":  # Python 3.8 wraps subscripts; 3.9+ does not
            self.visit(node.value)
        else:
            self.generic(node)

    def generic(self, node):
        self.out.append(type(node).__name__)
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        self.visit(item)
            elif isinstance(value, ast.AST):
                self.visit(value)

    def body(self, statements):
        if statements and is_docstring(statements[0]):
            statements = statements[1:]
        for statement in statements:
            self.visit(statement)

    def module(self, node):
        self.body(node.body)

    def name(self, node):
        if not isinstance(node.ctx, ast.Load):
            self.user.add(node.id)
        self.out.append((node.id, (), self.in_model))

    def attribute(self, node):
        attrs = []
        while isinstance(node, ast.Attribute):
            attrs.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Load):
                self.user.add(node.id)
            self.out.append((node.id, tuple(attrs), self.in_model))
            return
        tokens = ["Attr:" + attr for attr in attrs]
        self.out.extend(tokens)
        if self.in_model:
            self.ops.extend(token for token in tokens if is_op(token))
        self.visit(node)

    def number_literal(self, node):
        # A shape written (3, 5) or 3, a size written -1 or 1: one literal either way.
        if is_number(node):
            self.out.append("Num")
        else:
            self.generic(node)

    def constant(self, node):
        value = node.value
        if isinstance(value, bool) or value is None or value is Ellipsis:
            self.out.append(repr(value))
        elif isinstance(value, (str, bytes)):
            self.out.append("Str")
        else:
            self.out.append("Num")

    def keyword(self, node):
        self.out.append("kw:" + (node.arg or "**"))
        self.visit(node.value)

    def arg(self, node):
        self.user.add(node.arg)
        self.out.append("arg")  # the annotation is dropped: type hints do not change what runs

    def function(self, node, in_class=False):
        self.user.add(node.name)
        self.out.append(type(node).__name__)
        params = node.args.posonlyargs + node.args.args
        static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
        if in_class and params and not static:
            self.selves.add(params[0].arg)
        outer = self.in_model
        self.in_model = outer or node.name not in INPUT_FUNCTIONS
        for decorator in node.decorator_list:
            self.visit(decorator)
        self.visit(node.args)
        self.body(node.body)
        self.in_model = outer

    def class_def(self, node):
        self.user.add(node.name)
        self.out.append("ClassDef")
        for child in node.bases + node.keywords + node.decorator_list:
            self.visit(child)
        outer = self.in_model
        self.in_model = True
        statements = node.body[1:] if node.body and is_docstring(node.body[0]) else node.body
        for statement in statements:
            if isinstance(statement, FUNCTIONS):
                self.function(statement, in_class=True)
            else:
                self.visit(statement)
        self.in_model = outer

    def ann_assign(self, node):
        self.out.append("Assign")  # x: int = 3 is x = 3
        self.visit(node.target)
        if node.value is not None:
            self.visit(node.value)

    def import_(self, node):
        for alias in node.names:
            if alias.asname:
                self.imports[alias.asname] = alias.name
            else:
                head = alias.name.split(".")[0]
                self.imports[head] = head

    def import_from(self, node):
        module = "." * node.level + (node.module or "")
        for alias in node.names:
            if alias.name != "*":
                self.imports[alias.asname or alias.name] = module + "." + alias.name

    def handler(self, node):
        if node.name:
            self.user.add(node.name)
        self.generic(node)

    def scope_names(self, node):
        self.user.update(node.names)
        self.generic(node)

    def resolve(self):
        """(tokens, ops), with every name and attribute chain resolved."""
        imported = {k: v for k, v in self.imports.items() if k not in self.user}
        tokens = []
        ops = list(self.ops)
        for item in self.out:
            if isinstance(item, str):
                tokens.append(item)
                continue
            root, attrs, in_model = item
            if root in imported:
                resolved = [".".join(("api:" + imported[root],) + attrs[::-1])]
            else:
                resolved = ["Attr:" + attr for attr in attrs[:-1]]
                if attrs:
                    resolved.append("Attr:_" if root in self.selves else "Attr:" + attrs[-1])
                if root in self.selves:
                    resolved.append("Self")
                elif root in BUILTIN_NAMES and root not in self.user:
                    resolved.append("builtin:" + root)
                else:
                    resolved.append("Name")
            tokens.extend(resolved)
            if in_model:
                ops.extend(token for token in resolved if is_op(token))
        return tokens, ops


def tokens_of(source):
    walker = Tokens()
    walker.visit(ast.parse(source))
    return walker.resolve()


def answer(line):
    try:
        source = json.loads(line)
    except ValueError as error:
        return {"error": "request is not JSON: %s" % error}
    if not isinstance(source, str):
        return {"error": "request is not a JSON string"}
    try:
        tokens, ops = tokens_of(source)
        return {"tokens": " ".join(tokens), "ops": " ".join(sorted(ops))}
    except SyntaxError as error:
        where = " (line %d)" % error.lineno if error.lineno else ""
        return {"error": "SyntaxError: %s%s" % (error.msg, where)}
    except (ValueError, RecursionError, MemoryError) as error:
        return {"error": "%s: %s" % (type(error).__name__, error)}


def main():
    sys.setrecursionlimit(10000)
    out = sys.stdout
    out.write(json.dumps({"version": TOKENS_VERSION}) + "\n")
    out.flush()
    for line in sys.stdin.buffer:  # bytes: json.loads decodes UTF-8 whatever the locale says
        out.write(json.dumps(answer(line)) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
