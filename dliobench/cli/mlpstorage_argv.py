"""mlpstorage's newer command-line shape, rewritten into the older one the front door parses.

mlcommons/storage moved the division first and the model and storage type to positionals
(``docs/OBJECT_STORAGE_GUIDE.md``@224fbfbc "CLI Shape": ``mlpstorage <closed|open|whatif>
training <model> <datasize|datagen|run|configview> <file|object> [options]``;
``mlpstorage_py/cli/common_args.py``@dfe7b1f ``add_storage_type_arguments``;
``vectordb_args.py``@041cfcf ``add_vectordb_arguments(parser, mode)``). The older shape
(``mlpstorage training run --model unet3d --file``, ``mlpstorage_py/cli``@be69aeb) keeps
working; this module turns the newer into it before argparse sees it:

``closed training unet3d run file --x`` -> ``training run --model unet3d --file --x --closed``

``whatif`` is upstream's planning division (not submittable): it runs, judged as OPEN.
``configview`` is the resolved configuration (``run --what-if``).
"""

from __future__ import annotations

from collections.abc import Sequence

DIVISIONS = {"closed": "--closed", "open": "--open", "whatif": "--open"}
COMMANDS = {"training": ("datasize", "datagen", "run", "configview"),
            "checkpointing": ("datasize", "datagen", "run", "configview")}
STORAGE = {"file": "--file", "object": "--object"}
GLOBAL = ("-v", "--verbose", "-q", "--quiet")


def normalize(argv: Sequence[str]) -> list[str]:
    """``argv`` in the older shape (unchanged when it already is)."""
    argv = list(argv)
    i = 0
    while i < len(argv) and argv[i] in GLOBAL:
        i += 1
    head, rest = argv[:i], argv[i:]
    if rest[:1] == ["mlpstorage"]:
        head, rest = [*head, "mlpstorage"], rest[1:]
    division = DIVISIONS.get(rest[0]) if rest else None
    if division:
        rest = rest[1:]
    if not rest or rest[0] not in COMMANDS:
        return [*head, *rest]  # other benchmarks take the division themselves, if at all
    bench, words = rest[0], rest[1:]
    extra: list[str] = [division] if division else []
    if len(words) >= 2 and words[0] not in COMMANDS[bench] and not words[0].startswith("-") \
            and words[1] in COMMANDS[bench]:
        words = [words[1], "--model", words[0], *words[2:]]  # <model> <command>
        at = 3
    else:
        at = 1
    if len(words) > at and words[at] in STORAGE:
        extra.append(STORAGE[words.pop(at)])
    if words[:1] == ["configview"]:
        words = ["run", *words[1:]]
        extra.append("--what-if")
    return [*head, bench, *words, *extra]
