"""Checks README.md's tools table and commands against the build's tools.

usage: readme_check.py SOURCE_ROOT

- every executable that tools/*/CMakeLists.txt declares (add_executable) is the tool of exactly one
  row of the table under "## Tools", and every row names one of them;
- every command in a code block that runs one of those tools runs it as build/bin/TOOL;
- every code block that runs mpirun shows Open MPI's --allow-run-as-root (it refuses root without).
Prints "README ok" or one line per problem.
"""
import glob
import os
import re
import sys

root = sys.argv[1]
tools = set()
for cm in glob.glob(os.path.join(root, "tools", "*", "CMakeLists.txt")):
    with open(cm) as f:
        tools.update(re.findall(r"add_executable\(\s*([\w-]+)", f.read()))
with open(os.path.join(root, "README.md")) as f:
    text = f.read()

problems = []
section = re.search(r"^## Tools.*?$(.*?)^## ", text, re.S | re.M)
rows = [m.group(1) for m in re.finditer(r"^\| `([\w-]+)", section.group(1) if section else "", re.M)]
for t in sorted(tools):
    if rows.count(t) != 1:
        problems.append("tools table: %s listed %d times, expected once" % (t, rows.count(t)))
for r in rows:
    if r not in tools:
        problems.append("tools table: %s is not a tool of tools/*/CMakeLists.txt" % r)

# Code blocks: fenced ones and those indented by four spaces after a blank line.
blocks = re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M)
blocks += re.findall(r"(?:^\n)((?:^    .*\n)+)", text, re.M)
word = re.compile(r"(?<![\w/.-])(%s)(?![\w-])" % "|".join(sorted(tools, key=len, reverse=True)))
for b in blocks:
    for line in b.splitlines():
        cmd = line.strip()
        if cmd.startswith("#") or cmd.startswith("//"):
            continue
        for m in word.finditer(cmd):
            before = cmd[: m.start()]
            # a command word: at the start, or after mpirun's options / a pipe / env assignments
            if re.fullmatch(r"(?:\w+=\S+\s+)*(?:mpirun(?:\s+-\S+(?:\s+\d+)?)*\s+)?", before) or before.rstrip().endswith("|"):
                problems.append("command without build/bin/: " + cmd)
    if re.search(r"^\s*mpirun\s", b, re.M) and "--allow-run-as-root" not in b:
        problems.append("mpirun without --allow-run-as-root for root: " + re.search(r"^\s*(mpirun.*)$", b, re.M).group(1))
print("\n".join(problems) if problems else "README ok")
