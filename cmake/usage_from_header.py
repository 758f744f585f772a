"""A benchmark's usage is its source's header comment (the leading // lines). This writes that text, without the //
marks, as the raw string kUsage that the program's --help prints (xstage/bench/usage.hpp), so the header is the one
text a user reads in the file and from --help.
Usage: usage_from_header.py SOURCE OUT.inc"""
import pathlib
import re
import sys


def split_source(src):
    """(the header comment without its // marks, the rest of the file); tests/bench/check_usage.py reads both."""
    lines = pathlib.Path(src).read_text().splitlines()
    n = next((i for i, line in enumerate(lines) if not line.startswith("//")), len(lines))
    header = "".join(re.sub(r"^// ?", "", line) + "\n" for line in lines[:n])
    return header, "\n".join(lines[n:])


def main(src, out):
    text = split_source(src)[0]
    if not text:
        sys.exit(f"{src}: no header comment (the leading // lines are the program's usage)")
    if ')usage"' in text:
        sys.exit(f'{src}: the header comment holds the raw string\'s delimiter )usage"')
    inc = (f"// Generated from {pathlib.Path(src).name}'s header comment by cmake/usage_from_header.py.\n"
           f'static const char kUsage[] = R"usage({text})usage";\n')
    pathlib.Path(out).write_text(inc)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
