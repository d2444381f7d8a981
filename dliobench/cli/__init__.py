"""The command line: argv parsing and one function per subcommand."""

from dliobench.cli.main import main

__all__ = ["main"]
