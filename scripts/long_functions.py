#!/usr/bin/env python3
"""Lists the longest function bodies in the C++ sources (issue 22: none over ~80 lines).

    python3 scripts/long_functions.py [--over 80] [--top 10] [DIR...]   (default: src tools python/src)

A function is a brace block opened at the end of a line that looks like a definition (a
parenthesized parameter list before the brace; not a control statement, namespace, class,
struct, enum or lambda assigned inside another function); its length counts the lines from the
signature's line to the closing brace. A heuristic over the text (no parser): good enough to
find long functions, not a compiler.
"""
import argparse
import os
import re
import sys

CONTROL = re.compile(r"^\s*(if|for|while|switch|else|do|try|catch)\b|^\s*}\s*else\b")
TYPE = re.compile(r"^\s*(namespace|class|struct|enum|union|extern)\b")


def strip(line):
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
    return line.split("//", 1)[0]


def functions(path):
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    out, depth, stack, in_comment = [], 0, [], False
    for i, raw in enumerate(lines):
        line = raw
        if in_comment:
            if "*/" not in line:
                continue
            line, in_comment = line.split("*/", 1)[1], False
        if "/*" in line and "*/" not in line.split("/*", 1)[1]:
            line, in_comment = line.split("/*", 1)[0], True
        code = strip(line)
        for ch in code:
            if ch == "{":
                # a definition: the text before the brace (this line or the signature above) has ')'
                head = code[:code.index("{")] if "{" in code else code
                sig = head if head.strip() else strip(lines[i - 1]) if i else ""
                is_fn = (depth == len([s for s in stack if s[1] == "type"])  # directly in namespaces/classes
                         and ")" in (head + " " + (strip(lines[i - 1]) if i else ""))
                         and not CONTROL.search(head) and not TYPE.search(head) and "=" not in head.split("(")[0])
                stack.append((i, "fn" if is_fn else ("type" if TYPE.search(head) or TYPE.search(sig) else "block"), sig))
                depth += 1
            elif ch == "}" and stack:
                start, kind, _ = stack.pop()
                depth -= 1
                if kind == "fn":
                    # the signature may span lines above the brace: walk up to its first line
                    s = start
                    while s > 0 and strip(lines[s - 1]).strip() and not strip(lines[s - 1]).rstrip().endswith((";", "}", "{")) \
                            and not lines[s - 1].lstrip().startswith(("#", "//", "template")):
                        s -= 1
                    name = re.search(r"([~\w:]+(?:operator\S*)?)\s*\(", " ".join(strip(l) for l in lines[s:start + 1]))
                    out.append((i - s + 1, path, s + 1, name.group(1) if name else "?"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="*", default=["src", "tools", "python/src"])
    ap.add_argument("--over", type=int, default=80)
    ap.add_argument("--top", type=int, default=10)
    a = ap.parse_args()
    found = []
    for d in a.dirs:
        for root, _, files in os.walk(d):
            for f in files:
                if f.endswith((".cc", ".h", ".cpp")):
                    found += functions(os.path.join(root, f))
    found.sort(reverse=True)
    over = [f for f in found if f[0] > a.over]
    print(f"{len(over)} functions over {a.over} lines; the {a.top} longest:")
    for n, path, line, name in found[:max(a.top, len(over))]:
        print(f"{n:5d}  {path}:{line}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
