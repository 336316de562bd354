"""Size limits of the package's source (run by scripts/lint.sh).

A module of python/tilefuse over MAX_FILE_LINES lines, a class over MAX_CLASS_LINES or a function
over MAX_FUNCTION_LINES is a sign that it holds more than one responsibility: split it. Lines are
physical lines, as `wc -l` counts them; a class or function spans from its `def`/`class` line (or
its first decorator) to its last line. Exits 1 and lists each offender, or prints one summary line.
"""

from __future__ import annotations

import ast
import pathlib
import sys

MAX_FILE_LINES = 1000
MAX_CLASS_LINES = 500
MAX_FUNCTION_LINES = 150


def offenders(root: pathlib.Path) -> list[str]:
    """Every file, class and function under ``root`` (``*.py``) over its limit, as
    ``path:line: what (N lines > limit)`` strings, in path order."""
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        n = len(text.splitlines())
        if n > MAX_FILE_LINES:
            found.append(f"{path}: module ({n} lines > {MAX_FILE_LINES})")
        for node in ast.walk(ast.parse(text, filename=str(path))):
            if isinstance(node, ast.ClassDef):
                kind, limit = "class", MAX_CLASS_LINES
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                kind, limit = "function", MAX_FUNCTION_LINES
            else:
                continue
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            span = node.end_lineno - first + 1
            if span > limit:
                found.append(f"{path}:{first}: {kind} {node.name} ({span} lines > {limit})")
    return found


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "python/tilefuse")
    bad = offenders(root)
    for line in bad:
        print(line)
    if bad:
        print(f"{len(bad)} over the size limits: split them")
        return 1
    print(
        f"sizes: every module <= {MAX_FILE_LINES}, class <= {MAX_CLASS_LINES}, function <= {MAX_FUNCTION_LINES} lines"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
