#!/usr/bin/env python3
"""Issue 14's layout rules: lists files over 600 lines and functions over 80
lines (a brace-matching scan, comments and strings stripped) in the folders
below, less those other work owns. Usage: python3 tools/layout-check.py [ROOT]"""
import os, re, sys
ROOTS = ["src", "algorithms", "transports", "tools", "include", "examples"]
EXCL = ["transports/gloo", "transports/ofi", "transports/auto", "transports/shm", "tools/bench"]
EXTS = (".cpp", ".hpp", ".h", ".c", ".cc", ".cu")
FILE_MAX, FN_MAX = 600, 80

def strip(src):
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i); j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2); j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j])); i = j
        elif src.startswith('R"', i) and (i == 0 or not (src[i-1].isalnum() or src[i-1] == '_')):
            m = re.match(r'R"([^(]*)\(', src[i:])
            end = src.find(")" + m.group(1) + '"', i) + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", src[i:end])); i = end
        elif c in "\"'":
            if c == "'" and i > 0 and src[i-1].isalnum() and src[i+1:i+2].isdigit():
                out.append(c); i += 1; continue  # digit separator 1'000
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            out.append(c + " " * (j - i - 1) + c); i = j + 1
        elif c == "#" and (i == 0 or src[i-1] == "\n"):
            j = i
            while True:
                k = src.find("\n", j)
                if k < 0: k = n; break
                if src[k-1] == "\\": j = k + 1; continue
                break
            out.append(re.sub(r"[^\n]", " ", src[i:k])); i = k
        else:
            out.append(c); i += 1
    return "".join(out)

NONFN = re.compile(r"\b(namespace|class|struct|enum|union|extern)\b")
CTRL = re.compile(r"\b(if|for|while|switch|catch|do|else|try)\s*$")

def functions(text):
    res, stack, last = [], [], 0  # stack of (is_fn, start_pos, name)
    for i, c in enumerate(text):
        if c in ";":
            last = i + 1
        elif c == "{":
            head = text[last:i]
            in_fn = any(s[0] for s in stack)
            is_fn = False; name = ""
            if not in_fn:
                h = " ".join(head.split())
                if "(" in h and not NONFN.match(h.lstrip()) and not h.rstrip().endswith("=") \
                        and not re.search(r"=\s*$", h):
                    m = re.search(r"([~\w:<>]+(?:operator\s*\S+)?)\s*\(", h)
                    name = m.group(1) if m else h[:40]
                    if not re.match(r"^\s*(if|for|while|switch)\b", h) and not h.lstrip().startswith("["):
                        is_fn = True
            start = last + (len(head) - len(head.lstrip()))
            stack.append((is_fn, start, name))
            last = i + 1
        elif c == "}":
            if stack:
                is_fn, start, name = stack.pop()
                if is_fn:
                    res.append((name, text.count("\n", 0, start) + 1, text.count("\n", 0, i) + 1))
            last = i + 1
    return res

def main():
    base = sys.argv[1] if len(sys.argv) > 1 else "."
    files, fns = [], []
    for r in ROOTS:
        for d, _, fs in os.walk(os.path.join(base, r)):
            rel = os.path.relpath(d, base)
            if any(rel == e or rel.startswith(e + "/") for e in EXCL): continue
            for f in sorted(fs):
                if not f.endswith(EXTS): continue
                p = os.path.join(d, f); relp = os.path.relpath(p, base)
                src = open(p, encoding="utf-8", errors="replace").read()
                nl = src.count("\n")
                if nl > FILE_MAX: files.append((nl, relp))
                for name, a, b in functions(strip(src)):
                    if b - a + 1 > FN_MAX: fns.append((b - a + 1, relp, a, name))
    print(f"files over {FILE_MAX} lines: {len(files)}")
    for nl, p in sorted(files, reverse=True): print(f"  {nl:5d} {p}")
    print(f"functions over {FN_MAX} lines: {len(fns)}")
    for n, p, a, name in sorted(fns, reverse=True): print(f"  {n:5d} {p}:{a} {name}")
main()
