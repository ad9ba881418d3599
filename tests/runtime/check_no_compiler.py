#!/usr/bin/env python3
"""Fails when a binary holds code of the compiler or of the libraries only the compiler needs.

A program linked with furiosa::runtime_core must load and run .enf programs without them
(issue 28). Usage: check_no_compiler.py BINARY
"""
import re
import subprocess
import sys

FORBIDDEN = re.compile(r"furiosa::compiler::|onnx::|google::protobuf::|flatbuffers::|tflite::")


def main() -> int:
    binary = sys.argv[1]
    symbols = subprocess.run(["nm", "-C", binary], check=True, capture_output=True, text=True).stdout.splitlines()
    found = [s for s in symbols if FORBIDDEN.search(s)]
    if found:
        print(f"{binary} links {len(found)} symbols of the compiler or its libraries, e.g.")
        for s in found[:10]:
            print("  " + s)
        return 1
    program = sum("furiosa::program::" in s for s in symbols)
    if program == 0:
        print(f"{binary} has no furiosa::program symbols: is it the programs-only runtime test?")
        return 1
    print(f"{binary}: no compiler, ONNX, protobuf or FlatBuffers symbols ({program} furiosa::program symbols)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
