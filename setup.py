"""The optional C extension (everything else is in pyproject.toml).

``dliobench.storage._readfiles`` reads a list of whole files with the GIL released once
(see its source). ``optional=True``: where it does not build (no C compiler), installation
goes on and dliobench reads one file at a time in Python.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("dliobench.storage._readfiles",
                             sources=["dliobench/storage/_readfiles.c"], optional=True)])
