"""The optional C extension (everything else is in pyproject.toml).

``dliobench.storage._readfiles`` reads a list of whole files with the GIL released once
(see its source), and checks them against a template and their CRC-32 (``_crc32.c``).
``optional=True``: where it does not build (no C compiler), installation goes on and
dliobench reads one file at a time in Python.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("dliobench.storage._readfiles",
                             sources=["dliobench/storage/_readfiles.c",
                                      "dliobench/storage/_crc32.c"],
                             depends=["dliobench/storage/_crc32.h",
                                      "dliobench/storage/_template.h",
                                      "dliobench/storage/_named.h",
                                      "dliobench/storage/_block.h",
                                      "dliobench/storage/_readqueue.h",
                                      "dliobench/storage/_queueapi.h"],
                             extra_compile_args=["-O2"],
                             optional=True)])
