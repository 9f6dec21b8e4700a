#!/usr/bin/env python3
"""Runs the shell blocks of a Markdown file as written (CTest "docs: FILE"; docs/testing.md).

Every fenced block marked sh, bash, shell or console is a test step. The blocks of
one file run in order, each in its own `bash -e -o pipefail`, in a scratch folder that
holds links to the checkout's top-level folders (models/, data/, scripts/, ...) and to
the build folder as build/, so that relative paths work as they do in a checkout, and
whatever the commands write stays in the scratch folder (HOME is in it too). A block
passes when every command in it exits 0.

HTML comments on the lines just above a block (invisible when the Markdown is
rendered) adjust it for CI:

  <!-- doc-test: skip REASON -->          not run; the reason is printed
  <!-- doc-test: replace OLD => NEW -->   run with OLD replaced by NEW (a smaller
                                          --steps, --max-train-examples): each
                                          OLD must occur in the block
  <!-- doc-test: id NAME -->              names the block for `after`
  <!-- doc-test: after NAME -->           first runs the block NAME (of any file
                                          in the same folder or the README), with
                                          its own replacements: the commands a
                                          block builds on
  <!-- doc-test: file PATH -->            above a block of any language: its text is
                                          written to PATH (~ is HOME) when the run
                                          reaches it, as a reader saves a listing

--path runs every document as one reader would: the README, then docs/*.md in the
order the README's list of documents names them, all in one scratch folder, so that
a later document meets what an earlier one left (a run directory written twice is a
failure, as it is for the reader). A block already run for an `after` is not run
again. At the end nothing may be left outside runs/, HOME and the paths .gitignore
names (/build*/ ...), in the scratch folder or in the checkout: a stray file fails.

  doc_blocks.py --source SRC --build BUILD --work WORK --path      every document, in order
  doc_blocks.py --source SRC --build BUILD --work WORK FILE.md     one file's blocks (and its `after`s)
  doc_blocks.py --source SRC --list FILE.md [FILE.md ...]          list them and what CI does
  doc_blocks.py --self-test                                        the runner's own checks
"""
import fnmatch
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import time

SHELL = {"sh", "bash", "shell", "console"}
MARK = re.compile(r"^<!--\s*doc-test:\s*(\w+)\s*(.*?)\s*-->\s*$")


class Block:
    def __init__(self, path, line, text, marks):
        self.path, self.line, self.text = path, line, text
        self.skip = None
        self.replacements = []
        self.id = None
        self.after = []
        self.file = None
        for kind, arg in marks:
            if kind == "skip":
                self.skip = arg or "no reason given"
            elif kind == "replace":
                old, sep, new = arg.partition(" => ")
                if not sep:
                    raise SystemExit(f"{path}:{line}: 'replace' needs OLD => NEW: {arg}")
                self.replacements.append((old, new))
            elif kind == "id":
                self.id = arg
            elif kind == "after":
                self.after.append(arg)
            elif kind == "file":
                self.file = arg
            else:
                raise SystemExit(f"{path}:{line}: unknown doc-test mark '{kind}'")

    def where(self):
        return f"{self.path}:{self.line}"

    def script(self):
        text = self.text
        for old, new in self.replacements:
            if old not in text:
                raise SystemExit(f"{self.where()}: 'replace {old} => {new}': '{old}' is not in the block")
            text = text.replace(old, new)
        return text


def blocks_of(path, shown):
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^(\s*)(```+|~~~+)\s*([\w+-]*)", lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = len(m.group(1)), m.group(2), m.group(3)
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        marks, k = [], i - 1
        while k >= 0 and MARK.match(lines[k].strip()):
            mk = MARK.match(lines[k].strip())
            marks.insert(0, (mk.group(1), mk.group(2)))
            k -= 1
        if lang in SHELL or any(kind == "file" for kind, _ in marks):  # a block in a list item is indented: its lines lose the indent
            body = [line[indent:] if line[:indent].strip() == "" else line for line in lines[i + 1:j]]
            out.append(Block(shown, i + 1, "\n".join(body) + "\n", marks))
        i = j + 1
    return out


def all_blocks(source):
    files = [os.path.join(source, "README.md")] + sorted(glob.glob(os.path.join(source, "docs", "*.md")))
    return {f: blocks_of(f, os.path.relpath(f, source)) for f in files}


def reading_order(source):
    """The README, then the documents in the order its list of them ("- `docs/X.md` — ...") names them."""
    named = []
    for line in open(os.path.join(source, "README.md"), encoding="utf-8"):
        for doc in re.findall(r"`(docs/[\w-]+\.md)`", line) if line.startswith("- `docs/") else []:
            if doc not in named:
                named.append(doc)
    present = sorted(os.path.relpath(f, source) for f in glob.glob(os.path.join(source, "docs", "*.md")))
    missing = [d for d in present if d not in named]
    if missing:
        raise SystemExit(f"README.md's list of documents does not name {', '.join(missing)}: a reader never reaches it")
    return [os.path.join(source, "README.md")] + [os.path.join(source, d) for d in named if d in present]


def ignored(name, source):
    """Whether a top-level name is one .gitignore keeps out of git (its simple patterns: /build*/, *.swp ...)."""
    try:
        patterns = [p.strip() for p in open(os.path.join(source, ".gitignore")) if p.strip() and not p.startswith("#")]
    except OSError:
        patterns = []
    return any(fnmatch.fnmatch(name, p.strip("/")) for p in patterns)


def untracked(source):
    """The checkout's untracked files that .gitignore does not cover (None outside git)."""
    p = subprocess.run(["git", "-C", source, "status", "--porcelain", "--untracked-files=all"], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL)
    if p.returncode != 0:
        return None
    return {line[3:] for line in p.stdout.decode("utf-8", "replace").splitlines() if line.startswith("?? ")}


def strays(source, work, before):
    """What the commands left outside runs/, HOME and ignored paths: in the scratch folder, and in the
    checkout through its links."""
    out = []
    for name in sorted(os.listdir(work)):
        path = os.path.join(work, name)
        if name in ("runs", "home", "build") or ignored(name, source) or (os.path.islink(path) and name in os.listdir(source)):
            continue
        out.append(name + ("/" if os.path.isdir(path) else ""))
    after = untracked(source)
    if before is not None and after is not None:
        out += sorted(f"{f} (in the checkout)" for f in after - before)
    return out


def scratch(source, build, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "home"))
    for name in os.listdir(source):
        if name in ("build", ".git") or name.startswith("build-") or name == "runs":
            continue
        os.symlink(os.path.join(source, name), os.path.join(work, name))
    os.symlink(build, os.path.join(work, "build"))


def run_block(block, work, timeout):
    env = dict(os.environ, HOME=os.path.join(work, "home"), LMKIT_DOC_TEST="1")
    started = time.time()
    if block.file:  # a listing the reader saves
        path = env["HOME"] + block.file[1:] if block.file.startswith("~") else os.path.join(work, block.file)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w") as f:
            f.write(block.script())
        return 0, f"wrote {path}", time.time() - started
    try:
        p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.script()], cwd=work, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        rc, output = p.returncode, p.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        rc, output = "timeout", (e.stdout or b"").decode("utf-8", "replace")
    return rc, output, time.time() - started


def self_test():
    """The runner itself: a failing command fails its file, a skip needs no build, a replacement
    that does not apply is an error, and `after` runs the named block first."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "src", "docs"))
        os.makedirs(os.path.join(tmp, "build"))

        def check(text, expect_rc, expect_out):
            with open(os.path.join(tmp, "src", "docs", "t.md"), "w") as f:
                f.write(text)
            p = subprocess.run([sys.executable, __file__, "--source", os.path.join(tmp, "src"), "--build",
                                os.path.join(tmp, "build"), "--work", os.path.join(tmp, "work"),
                                os.path.join(tmp, "src", "docs", "t.md")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            out = p.stdout.decode()
            assert (p.returncode == 0) == (expect_rc == 0) and expect_out in out, f"{text!r}: rc {p.returncode}\n{out}"

        open(os.path.join(tmp, "src", "README.md"), "w").write("")
        open(os.path.join(tmp, "src", ".gitignore"), "w").write("/build*/\n/runs/\n")
        check("```sh\ntrue\nfalse\ntrue\n```\n", 1, "FAIL docs/t.md:1")
        check("```sh\necho x | grep -q x\n```\n", 0, "ok   docs/t.md:1")
        check("```sh\nfalse | true\n```\n", 1, "FAIL")  # pipefail
        check("<!-- doc-test: skip no reason needed here -->\n```sh\nfalse\n```\n", 0, "skip docs/t.md:2: no reason")
        check("<!-- doc-test: replace --steps 9 => --steps 1 -->\n```sh\ntrue --steps 8\n```\n", 1, "is not in the block")
        check("<!-- doc-test: replace exit 1 => exit 0 -->\n```sh\nexit 1\n```\n", 0, "ok")
        check("<!-- doc-test: id a -->\n```sh\nmkdir -p runs; touch runs/made\n```\n\n<!-- doc-test: after a -->\n  ```bash\n"
              "  test -f runs/made\n  ```\n", 0, "2 block(s) ran")
        check("```sh\ntouch stray; mkdir -p runs build-x; touch runs/ok build-x/ok ~/ok\n```\n", 1, "left 1 file(s) outside runs/ "
              "and ignored paths: stray")
        check("<!-- doc-test: file ~/p/main.cpp -->\n```cpp\nint main() {}\n```\n```sh\ngrep -q 'int main' ~/p/main.cpp\n```\n",
              0, "2 block(s) ran")
        # --path: the README, then the documents its list names, in that order, in one folder
        open(os.path.join(tmp, "src", "README.md"), "w").write(
            "```sh\nmkdir -p runs; echo r > runs/order\n```\n- `docs/b.md` — b\n- `docs/t.md` — t\n")
        open(os.path.join(tmp, "src", "docs", "b.md"), "w").write("```sh\necho b >> runs/order\n```\n")
        open(os.path.join(tmp, "src", "docs", "t.md"), "w").write("```sh\necho t >> runs/order; test \"$(cat runs/order)\" = \"$(printf 'r\\nb\\nt')\"\n```\n")
        p = subprocess.run([sys.executable, __file__, "--source", os.path.join(tmp, "src"), "--build", os.path.join(tmp, "build"),
                            "--work", os.path.join(tmp, "work"), "--path"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert p.returncode == 0 and b"3 block(s) ran" in p.stdout, p.stdout.decode()
        open(os.path.join(tmp, "src", "docs", "unlisted.md"), "w").write("")
        p = subprocess.run([sys.executable, __file__, "--source", os.path.join(tmp, "src"), "--build", os.path.join(tmp, "build"),
                            "--work", os.path.join(tmp, "work"), "--path"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert p.returncode != 0 and b"does not name docs/unlisted.md" in p.stdout, p.stdout.decode()
        check("```text\nfalse\n```\n```sh\ntest \"$HOME\" != ~root -a -d build\n```\n", 0, "1 block(s) ran")
    print("doc_blocks.py: the runner's own checks pass")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source")
    ap.add_argument("--build")
    ap.add_argument("--work")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--path", action="store_true", help="every document in the README's order, in one scratch folder")
    ap.add_argument("--timeout", type=int, default=900, help="seconds a block may run")
    ap.add_argument("--self-test", action="store_true", help="check the runner itself")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not a.source:
        ap.error("give --source SRC")
    source = os.path.realpath(a.source)
    everything = all_blocks(source)
    by_id = {b.id: b for bs in everything.values() for b in bs if b.id}
    if a.list:
        for f in a.files:
            for b in everything[os.path.realpath(f)]:
                what = f"skip: {b.skip}" if b.skip else "run" + "".join(f", {o!r} -> {n!r}" for o, n in b.replacements)
                print(f"{b.where()}: {what}")
        return 0
    if not (a.build and a.work) or (a.path == bool(a.files)) or len(a.files) > 1:
        ap.error("give --source, --build, --work and --path or one FILE.md")
    files = reading_order(source) if a.path else [os.path.realpath(a.files[0])]
    work = os.path.realpath(a.work)
    before = untracked(source)
    scratch(source, os.path.realpath(a.build), work)
    ran, skipped, done = 0, 0, set()

    def run(b, why=""):
        nonlocal ran
        for name in b.after:
            if name not in by_id:
                print(f"FAIL {b.where()}: 'after {name}': no block has 'id {name}'")
                return False
            if name not in done and not run(by_id[name], f" (before {b.where()})"):
                return False
        rc, output, seconds = run_block(b, work, a.timeout)
        if rc != 0:
            print(f"FAIL {b.where()}{why}: exit {rc} after {seconds:.0f} s\n--- the block as run:\n{b.script()}--- its output (end):")
            print("\n".join(output.rstrip().split("\n")[-40:]))
            return False
        print(f"ok   {b.where()}{why} ({seconds:.0f} s)")
        done.add(b.id or b.where())
        ran += 1
        return True

    for f in files:
        for b in everything[f]:
            if b.skip:
                print(f"skip {b.where()}: {b.skip}")
                skipped += 1
            elif (b.id or b.where()) not in done and not run(b):
                return 1
    left = strays(source, work, before)
    if left:
        print(f"FAIL the commands left {len(left)} file(s) outside runs/ and ignored paths: {', '.join(left)}")
        return 1
    shown = "README.md and docs/*.md" if a.path else os.path.relpath(files[0], source)
    print(f"{shown}: {ran} block(s) ran and passed, {skipped} skipped with a reason, nothing left outside runs/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
