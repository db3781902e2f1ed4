"""Which answers may reach a reasoning-gym scorer that evaluates them.

Some reasoning-gym scorers evaluate the answer as code: ``eval(answer)`` to read
a list (n-queens, spiral matrix, binary matrix, string insertion) or sympy's
``parse_expr``, itself an ``eval`` (countdown, 24, polynomial multiplication,
integration). An answer is what a model wrote, and under ``interactions serve``
what any client sent: ``__import__('os').system(...)`` would run there, and
``9**9**9**9`` would hold the process in C code that no timeout breaks. So for
those datasets (found by their module's source, once per dataset class) an
answer is passed on only when it is plain data or arithmetic:

* it parses as one Python expression made of literals, names that are not
  dunders, arithmetic and comparisons, and calls only to the math functions in
  :data:`MATH_CALLS` (``sqrt(2)``, ``sin(x)``), never of attributes or results;
* every power has a small literal exponent (``x**3``, ``(2*x)**(3/2)``; not
  ``9**9**9`` or ``2**x``);
* no text, list or tuple is repeated by ``*``, and nothing is shifted;
* text that does not parse as Python (a board drawn with ``Q`` and ``_``) is
  passed on, since ``eval`` refuses it too, unless it uses sympy's factorial
  notation (``!``) on a number or a parenthesis, which sympy turns into a call;
* at most :data:`MAX_ANSWER` characters.

An answer refused here is scored 0, with the reason in the turn's ``extra``.
"""

from __future__ import annotations

import ast
import inspect
import re
from typing import Any

__all__ = ["MATH_CALLS", "MAX_ANSWER", "MAX_EXPONENT", "evaluates", "unsafe_answer"]

#: The functions an arithmetic answer may call (sympy's names for them).
MATH_CALLS = frozenset(
    ("sqrt", "exp", "log", "ln", "sin", "cos", "tan", "cot", "sec", "csc", "asin", "acos"),
) | frozenset(("atan", "sinh", "cosh", "tanh", "Abs", "abs", "Integral"))
#: The largest exponent a power in an answer may have.
MAX_EXPONENT = 100
#: The longest answer passed to a scorer that evaluates it.
MAX_ANSWER = 10_000
#: What in a scorer's module shows that it evaluates text.
_EVALUATES = re.compile(r"(?<![\w.])eval\(|parse_expr\(|sympify\(|(?<![\w.])exec\(")
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)
_PLAIN = (
    ast.Expression, ast.Constant, ast.Name, ast.Load, ast.List, ast.Tuple, ast.Set,
    ast.Dict, ast.UnaryOp, ast.UAdd, ast.USub, ast.Not, ast.BinOp, ast.Compare,
    ast.BoolOp, ast.And, ast.Or, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE,
    ast.Call, ast.Subscript, ast.Slice, *_ARITHMETIC,
)  # fmt: skip


#: What :func:`evaluates` found, by dataset class.
_evaluating: dict[Any, bool] = {}


def evaluates(dataset_class: Any) -> bool:
    """Whether ``dataset_class``'s module evaluates text as code (its source says so)."""
    if dataset_class not in _evaluating:
        module = inspect.getmodule(dataset_class)
        try:
            source = inspect.getsource(module) if module is not None else ""
        except (OSError, TypeError):
            source = "eval("  # no source to read: assume the worst
        _evaluating[dataset_class] = _EVALUATES.search(source) is not None
    return _evaluating[dataset_class]


def unsafe_answer(answer: str) -> str | None:
    """Why ``answer`` must not reach a scorer that evaluates it, or ``None``."""
    if len(answer) > MAX_ANSWER:
        return f"it is over {MAX_ANSWER:,} characters"
    try:
        tree = ast.parse(answer.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        if re.search(r"[\d)\]]\s*!(?!=)", answer):
            return "it uses factorial notation (!), which sympy evaluates as a call"
        return None  # not Python: eval refuses it as well
    for node in ast.walk(tree):
        problem = _problem(node)
        if problem is not None:
            return problem
    return None


def _problem(node: ast.AST) -> str | None:
    if not isinstance(node, _PLAIN):
        return f"it holds Python code ({type(node).__name__}), not data or arithmetic"
    if isinstance(node, ast.Name) and node.id.startswith("__"):
        return f"it names {node.id}"
    if isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name not in MATH_CALLS or node.keywords:
            return "it calls a function other than a math function"
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Pow) and not _small_exponent(node.right):
            return f"a power's exponent is not a number of at most {MAX_EXPONENT}"
        if isinstance(node.op, ast.Mult) and any(map(_sequence, (node.left, node.right))):
            return "it repeats a text or a list with *"
    return None


def _small_exponent(node: Any) -> bool:
    """A number of at most ``MAX_EXPONENT``, or a fraction of two (``(3/2)``), signed."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return _small_int(node.left) and _small_int(node.right)
    return _small_int(node)


def _small_int(node: Any) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    value = node.value if isinstance(node, ast.Constant) else None
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and abs(value) <= MAX_EXPONENT
    )


def _sequence(node: ast.AST) -> bool:
    constant = isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes))
    return constant or isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict))
