"""A user's own code and files named on the command line, and what can be checked about them
before TensorFlow starts.

    --model=MODULE:FUNCTION      e.g. --model=examples.two_branch:build_model
    --dataset=MODULE:FUNCTION    e.g. --dataset=examples.two_branch:make_dataset
    --model=PATH.keras           a saved Keras model (experiments/workload/user_model.py)
    --dataset=PATH.npz           arrays (experiments/workload/npz_data.py)

MODULE is imported the way `python -m experiments.run` imports anything: from the current
directory and PYTHONPATH. Every task of a local cluster inherits both, so a module that imports
in the command's directory imports in every task; in a Vertex job or a TFJob the module must be
in the image (or on its PYTHONPATH).

`check_reference` runs before TensorFlow starts and without running the user's module: it finds
the module (a missing one is reported here, not after a cluster has formed) and reads its source
for a top-level definition of FUNCTION. `load_reference` imports it for real (in the task, where
TensorFlow is wanted anyway) and raises the same one-line UserCodeError for what the source did
not show (an import failing inside the module, an attribute made at run time that is missing or
not callable).
"""
import ast
import importlib
import importlib.util
import os
import re
import sys
import zipfile

_REFERENCE = re.compile(r"([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*):([A-Za-z_]\w*)")


class UserCodeError(ValueError):
    """Bad user code or file: one line naming the flag, the value and what is wrong (exit 2)."""


def is_reference(value):
    """MODULE:FUNCTION (and not a path such as C:\\data.npz or ./x.keras)."""
    return ":" in value and not value.endswith((".keras", ".npz"))


def split_reference(flag, value):
    """'pkg.mod:build' -> ('pkg.mod', 'build'); UserCodeError when malformed."""
    match = _REFERENCE.fullmatch(value)
    if not match:
        raise UserCodeError(f"--{flag}={value!r} is not MODULE:FUNCTION (e.g. "
                            f"my_pkg.nets:build, importable from the current directory or "
                            f"PYTHONPATH)")
    return match.group(1), match.group(2)


def _find(flag, value, module):
    if "" not in sys.path and os.getcwd() not in sys.path:
        # `python -m` puts the working directory first; a caller that was not started that way
        # (a test, an embedding program) still finds what the command would.
        sys.path.insert(0, os.getcwd())
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as e:  # a parent package missing or failing to import
        raise UserCodeError(f"--{flag}={value}: module {module!r} cannot be imported "
                            f"({type(e).__name__}: {_first_line(e)})") from None
    except Exception as e:  # a parent package's __init__ raised
        raise UserCodeError(f"--{flag}={value}: importing {module!r} raised "
                            f"{type(e).__name__}: {_first_line(e)}") from None
    if spec is None:
        raise UserCodeError(f"--{flag}={value}: module {module!r} not found (it must be "
                            f"importable from the current directory {os.getcwd()} or "
                            f"PYTHONPATH)")
    return spec


def _first_line(error):
    text = str(error).strip()
    return text.splitlines()[0] if text else "no message"


def _top_level_names(tree):
    """{name: the AST node binding it} for definitions, assignments and imports at top level;
    None when the module may bind names the source does not show (star imports, __getattr__)."""
    names = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                names[(alias.asname or alias.name).split(".")[0]] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        names[name.id] = node.value
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target,
                                                                             ast.Name):
            names[node.target.id] = node.value
        else:  # if/try blocks: names bound conditionally count as bound
            for inner in ast.walk(node):
                if isinstance(inner, (ast.FunctionDef, ast.ClassDef)):
                    names.setdefault(inner.name, inner)
                elif isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                    names.setdefault(inner.id, inner)
                elif isinstance(inner, (ast.Import, ast.ImportFrom)):
                    for alias in inner.names:
                        names.setdefault((alias.asname or alias.name).split(".")[0], inner)
    if "__getattr__" in names:
        return None
    return names


_NOT_CALLABLE = (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.JoinedStr,
                 ast.ListComp, ast.DictComp, ast.SetComp)


def check_reference(flag, value):
    """Static check of MODULE:FUNCTION: the module is found and its source binds FUNCTION at top
    level to something that may be callable. Runs no user code (a package's parents excepted:
    finding pkg.mod imports pkg)."""
    module, attr = split_reference(flag, value)
    spec = _find(flag, value, module)
    origin = spec.origin if spec.has_location else None
    if not origin or not origin.endswith(".py"):
        return  # a namespace package, an extension module: only the import can tell
    try:
        with open(origin, "rb") as f:
            tree = ast.parse(f.read(), filename=origin)
    except SyntaxError as e:
        raise UserCodeError(f"--{flag}={value}: module {module!r} cannot be imported "
                            f"(SyntaxError in {origin} line {e.lineno}: {e.msg})") from None
    except OSError as e:
        raise UserCodeError(f"--{flag}={value}: cannot read {origin} ({e.strerror})") from None
    names = _top_level_names(tree)
    if names is None:
        return
    if attr not in names:
        defined = sorted(n for n, node in names.items() if isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not n.startswith("_"))
        raise UserCodeError(f"--{flag}={value}: module {module!r} has no attribute {attr!r}"
                            f"{'; its functions: ' + ', '.join(defined) if defined else ''}")
    if isinstance(names[attr], _NOT_CALLABLE):
        raise UserCodeError(f"--{flag}={value}: {module}.{attr} is not callable (it is "
                            f"assigned a {type(names[attr]).__name__.lower()} literal)")


def load_reference(flag, value):
    """Imports MODULE and returns FUNCTION; UserCodeError (one line) for every way that fails."""
    module, attr = split_reference(flag, value)
    _find(flag, value, module)
    try:
        loaded = importlib.import_module(module)
    except Exception as e:  # the user's module failing on import, whatever it raises
        raise UserCodeError(f"--{flag}={value}: importing {module!r} raised "
                            f"{type(e).__name__}: {_first_line(e)}") from None
    if not hasattr(loaded, attr):
        raise UserCodeError(f"--{flag}={value}: module {module!r} has no attribute {attr!r}")
    function = getattr(loaded, attr)
    if not callable(function):
        raise UserCodeError(f"--{flag}={value}: {module}.{attr} is not callable (it is a "
                            f"{type(function).__name__})")
    return function


def check_keras_file(flag, path):
    """A .keras file exists and is a Keras archive (a zip holding config.json)."""
    if not os.path.isfile(path):
        raise UserCodeError(f"--{flag}={path}: no such file")
    try:
        with zipfile.ZipFile(path) as archive:
            if "config.json" not in archive.namelist():
                raise UserCodeError(f"--{flag}={path}: not a Keras model archive (no "
                                    f"config.json inside; save with model.save('x.keras'))")
    except (zipfile.BadZipFile, OSError) as e:
        raise UserCodeError(f"--{flag}={path}: not a Keras model archive ({_first_line(e)}; "
                            f"save with model.save('x.keras'))") from None


def call_user(flag, value, function, *args):
    """Calls the user's FUNCTION; whatever it raises becomes one line naming it."""
    try:
        return function(*args)
    except UserCodeError:
        raise
    except Exception as e:
        raise UserCodeError(f"--{flag}={value} raised {type(e).__name__}: "
                            f"{_first_line(e)}") from None
