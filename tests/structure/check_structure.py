#!/usr/bin/env python3
"""The code-structure rules CI holds lmkit to (docs/architecture.md, "Structure rules"):

1. no function in src/ or apps/ is longer than 60 lines (its braces included);
2. no file outside src/lmkit/models/ names a model family in a string literal
   (logic or help text): what a family is, is the family's to say (models::Family);
3. the layers hold: a folder of src/lmkit/ includes only the folders below it (LAYERS);
4. a struct is filled one field a line: no `a.x = 1, a.y = 2;` (comma-chained assignments).

Usage: check_structure.py SOURCE_DIR. Prints each violation as FILE:LINE: what, and
exits 1 when there is one.
"""
import os
import re
import sys

MAX_LINES = 60
FAMILY = re.compile(r"\b(bert|roberta|spanbert|electra|gpt|gpt2|gpt-2|t5|llama|bloom|mistral|transformer)\b", re.I)
# Tokenizer families are the tokenizer's own registry (tokenizer/families.cpp; tokenizer.h's
# default kind); hf_json.cpp reads HF tokenizer.json type names ("BertProcessing").
FAMILY_EXEMPT = ("src/lmkit/models/", "src/lmkit/tokenizer/families.cpp", "src/lmkit/tokenizer/tokenizer.h",
                 "src/lmkit/tokenizer/hf_json.cpp")
# Each folder of src/lmkit/ and the folders it may include (docs/architecture.md, "Layers").
LAYERS = {
    "core": set(),
    "nn": {"core"},
    "io": {"core"},
    "dist": {"core"},
    "tokenizer": {"core"},
    "models": {"core", "nn", "io"},
    "data": {"core", "tokenizer", "io", "dist"},
    "eval": {"core", "nn", "io", "dist", "tokenizer", "models", "data"},
    "train": {"core", "nn", "io", "dist", "tokenizer", "models", "data", "eval"},
    "tasks": {"core", "nn", "io", "dist", "tokenizer", "models", "data", "eval", "train"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"lmkit/(\w+)/', re.M)
CHAINED = re.compile(r"^\s+\w+(\.\w+)+ = [^;\n]*, \w+(\.\w+)+ = ", re.M)
SCOPE = re.compile(r'\b(namespace|class|struct|union|enum)\b|extern\s*"C"')
FUNCTION_END = re.compile(r"\)\s*(const|override|final|noexcept|mutable|->\s*[\w:<>,\s*&]+|\s)*$")


def strip(text):
    """The code with comments removed and literals emptied (same line count), and the literals."""
    out, literals, i, n, line = [], [], 0, len(text), 1
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith('R"', i):
            k = text.find("(", i)
            delim = ")" + text[i + 2:k] + '"'
            j = text.find(delim, k)
            j = n if j < 0 else j + len(delim)
            literals.append((line, text[i:j]))
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            if c == '"':
                literals.append((line, text[i + 1:j]))
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
        line = 1 + "".join(out).count("\n") if c in "\"'/R" else line + (c == "\n")
    return "".join(out), literals


def long_functions(code):
    """(first line, lines, signature) of each function body over MAX_LINES."""
    found, stack, start = [], [], 0
    line = 1
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c == "{":
            prefix = code[start:i].strip()
            if stack and stack[-1][0] in ("function", "inner"):
                kind = "inner"
            elif SCOPE.search(prefix) and "(" not in prefix.split("{")[-1].split("=")[0][-1:]:
                kind = "scope"
            elif FUNCTION_END.search(prefix) or re.search(r"\)\s*:\s*[\w:]+[({]", prefix):
                kind = "function"
            else:
                kind = "inner"
            stack.append((kind, line, prefix.splitlines()[-1] if prefix else ""))
            start = i + 1
        elif c == "}":
            if stack:
                kind, first, signature = stack.pop()
                if kind == "function" and line - first + 1 > MAX_LINES:
                    found.append((first, line - first + 1, signature))
            start = i + 1
        elif c == ";":
            start = i + 1
    return found


def code_with_includes(path):
    """The file with comments removed but string literals kept (the include paths)."""
    return re.sub(r"//[^\n]*", "", open(path, encoding="utf-8").read())


def main(root):
    problems = []
    for top in ("src", "apps"):
        for folder, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".cpp", ".h")):
                    continue
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, root)
                code, literals = strip(open(path, encoding="utf-8").read())
                parts = rel.split(os.sep)
                if len(parts) > 3 and parts[:2] == ["src", "lmkit"] and parts[2] in LAYERS:
                    for m in INCLUDE.finditer(code_with_includes(path)):
                        if m.group(1) != parts[2] and m.group(1) in LAYERS and m.group(1) not in LAYERS[parts[2]]:
                            line = code_with_includes(path)[:m.start()].count("\n") + 1
                            problems.append(f"{rel}:{line}: {parts[2]}/ includes {m.group(1)}/, a layer above it")
                for m in CHAINED.finditer(code):
                    line = code[:m.start()].count("\n") + 1
                    problems.append(f"{rel}:{line}: fields set in one line, comma-chained (one a line)")
                for first, lines, signature in long_functions(code):
                    problems.append(f"{rel}:{first}: a function of {lines} lines (at most {MAX_LINES}): {signature[:80]}")
                if rel.startswith(FAMILY_EXEMPT):
                    continue
                for line, literal in literals:
                    m = FAMILY.search(literal)
                    if m:
                        problems.append(f"{rel}:{line}: names the family '{m.group(0)}' in \"{literal[:70]}\"")
    for p in problems:
        print(p)
    print(f"structure: {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
