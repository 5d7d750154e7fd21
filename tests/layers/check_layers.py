#!/usr/bin/env python3
"""Holds every #include in lib/ and tools/ to the layering the CMake files declare.

The declarations are the single source: `cudaagent_add_library(<area> DEPENDS ... OPTIONAL_DEPENDS
...)` in lib/<area>/CMakeLists.txt and `cudaagent_add_tool(<program> DEPENDS ...)` in
tools/<program>/CMakeLists.txt. This check fails when
  - the declared graph has a cycle, or a stage depends on another stage (only the stages listed in
    STAGE_USES may use the ones named there);
  - a file of area A includes a public header of area B that A does not declare, directly or
    through the areas it declares;
  - a file includes a private header ("name.h") that is not in its own folder;
  - a tool includes a header of an area its DEPENDS does not reach.
Usage: check_layers.py [REPO_ROOT]   (exit 0: clean; 1: violations, listed one per line)
"""
import os
import re
import sys

STAGES = {"synth", "filter", "dedup", "verify", "profile", "reward", "rollout", "train"}
# The only stage-to-stage uses allowed: the agent loop scores episodes with the scoring stages.
STAGE_USES = {"rollout": {"verify", "profile", "reward"}}

CALL = re.compile(r"cudaagent_add_(library|tool)\(\s*([a-z_0-9]+)(.*?)\)", re.S)
KEYWORDS = {"DEPENDS", "OPTIONAL_DEPENDS", "LINKS", "PUBLIC_LINKS", "SOURCES"}
PUBLIC_INCLUDE = re.compile(r'^\s*#\s*include\s+"cudaagent/([a-z_0-9]+)/[^"]+"', re.M)
ANY_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def declared(cmake_text):
    """(kind, name, [areas]) for each cudaagent_add_* call in a CMakeLists.txt."""
    found = []
    for kind, name, rest in CALL.findall(cmake_text):
        words, areas, collecting = rest.split(), [], False
        for word in words:
            if word in KEYWORDS:
                collecting = word in ("DEPENDS", "OPTIONAL_DEPENDS")
            elif collecting:
                areas.append(word)
        found.append((kind, name, areas))
    return found


def closure(graph, start):
    seen, stack = set(), list(graph.get(start, ()))
    while stack:
        area = stack.pop()
        if area not in seen:
            seen.add(area)
            stack.extend(graph.get(area, ()))
    return seen


def source_files(folder):
    for directory, _, names in os.walk(folder):
        for name in sorted(names):
            if name.endswith((".cpp", ".h", ".cc", ".cu")):
                yield os.path.join(directory, name)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), "..", ".."))
    problems = []
    graph, tools = {}, {}
    for base, table in (("lib", graph), ("tools", tools)):
        for entry in sorted(os.listdir(os.path.join(root, base))):
            cmake = os.path.join(root, base, entry, "CMakeLists.txt")
            if os.path.isfile(cmake):
                with open(cmake) as handle:
                    for kind, name, areas in declared(handle.read()):
                        table[name] = set(areas)
    for area, deps in graph.items():
        for dep in deps:
            if dep not in graph:
                problems.append(f"lib/{area}: depends on '{dep}', which is not an area")
        if area in closure(graph, area):
            problems.append(f"lib/{area}: its dependencies lead back to itself (a cycle)")
        if area in STAGES:
            for dep in closure(graph, area) & STAGES:
                if dep not in STAGE_USES.get(area, set()):
                    problems.append(f"lib/{area}: a stage may not use the stage '{dep}'")

    def check_file(path, allowed, owner):
        with open(path, errors="replace") as handle:
            text = handle.read()
        rel = os.path.relpath(path, root)
        for area in PUBLIC_INCLUDE.findall(text):
            if area not in allowed:
                problems.append(f"{rel}: includes a header of '{area}', which {owner} does not declare")
        for name in ANY_INCLUDE.findall(text):
            if "/" not in name and not os.path.isfile(os.path.join(os.path.dirname(path), name)):
                problems.append(f"{rel}: includes \"{name}\", which is not in its own folder")

    for area in graph:
        allowed = closure(graph, area) | {area}
        for folder in (os.path.join(root, "lib", area), os.path.join(root, "lib", "include", "cudaagent", area)):
            if os.path.isdir(folder):
                for path in source_files(folder):
                    check_file(path, allowed, f"lib/{area}")
    for folder in sorted(os.listdir(os.path.join(root, "lib", "include", "cudaagent"))):
        if folder not in graph:
            problems.append(f"lib/include/cudaagent/{folder}: headers of an area that lib/ does not build")
    for program, areas in tools.items():
        allowed = set(areas)
        for area in areas:
            allowed |= closure(graph, area)
        for path in source_files(os.path.join(root, "tools", program)):
            check_file(path, allowed, f"cudaagent-{program}")
    for line in problems:
        print(line)
    if not problems:
        print(f"layers: {len(graph)} areas, {len(tools)} tools, every include follows the declared layering")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
