#!/usr/bin/env python3
"""gen-settings-table.py: regenerates the README settings table from proto/settings.def.

    scripts/gen-settings-table.py          rewrite README.md between the settings markers
    scripts/gen-settings-table.py --check  exit 1 (with a diff) when README.md is out of date

settings.def is the single declaration of every setting; the README table is derived from it so
the two cannot disagree (the --check form runs as the CTest test settings_table_test).
"""
import argparse
import difflib
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- settings:begin -->", "<!-- settings:end -->"

STRING = r'"((?:[^"\\]|\\.)*)"'
DECL = re.compile(
    r"GSWAP_SETTING\(\s*(\w+)\s*,\s*" + r"\s*,\s*".join([STRING] * 6) + r"\s*\)", re.S)


def unescape(s):
    return s.replace('\\"', '"').replace("\\\\", "\\")


def declarations(text):
    # Drop // comments first so commented-out examples are not read as declarations.
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
    return [[m.group(1)] + [unescape(g) for g in m.groups()[1:]] for m in DECL.finditer(text)]


def table(decls):
    def cell(s):
        return s.replace("|", "\\|")

    lines = [
        "| Environment variable | JSON key | Type | Default | Read by | Description |",
        "|---|---|---|---|---|---|",
    ]
    for ident, env, key, typ, default, scope, doc in decls:
        lines.append("| {} | {} | {} | {} | {} | {} |".format(
            f"`{env}`" if env else "—", f"`{key}`" if key else "—", cell(typ),
            f"`{default}`" if default else "(empty)", scope, cell(doc)))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true", help="fail when README.md is out of date")
    ap.add_argument("--readme", default=str(ROOT / "README.md"))
    ap.add_argument("--def", dest="deffile", default=str(ROOT / "proto" / "settings.def"))
    args = ap.parse_args()
    decls = declarations(pathlib.Path(args.deffile).read_text())
    if not decls:
        sys.exit("gen-settings-table: no declarations found in " + args.deffile)
    readme_path = pathlib.Path(args.readme)
    readme = readme_path.read_text()
    if BEGIN not in readme or END not in readme:
        sys.exit(f"gen-settings-table: {args.readme} lacks the {BEGIN} / {END} markers")
    head, rest = readme.split(BEGIN, 1)
    old, tail = rest.split(END, 1)
    new = "\n" + table(decls) + "\n"
    if args.check:
        if old != new:
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(True), new.splitlines(True), "README.md", "settings.def"))
            print("\nREADME.md settings table differs from proto/settings.def; "
                  "run scripts/gen-settings-table.py")
            return 1
        return 0
    readme_path.write_text(head + BEGIN + new + END + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
