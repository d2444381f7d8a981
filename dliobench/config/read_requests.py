"""``reader.read_requests``: the read requests a traced job issued per file, as the
configuration writes them (``OFF+LEN,...@SIZE``) and as the replay issues them for files of
any size (``storage/traced.py``). Pure parsing, so a bad value is refused when the
configuration is loaded (``config.rules``), before any work."""

from __future__ import annotations

from dliobench.base.errors import ConfigError


class Requests:
    """A file's read requests as a traced job issued them: ``(offset, length)`` pairs for
    a file of ``size`` bytes. Written ``"OFF+LEN,OFF+LEN,...@SIZE"``. For a file of another
    size, a request that reached the end of the traced file reaches the end of this one,
    and requests past its end are dropped."""

    def __init__(self, pairs: list[tuple[int, int]], size: int) -> None:
        self.pairs, self.size = pairs, size

    @classmethod
    def parse(cls, text: str) -> Requests:
        """From the configuration's words."""
        try:
            body, size = text.split("@")
            pairs = [(int(o), int(n)) for o, n in (p.split("+") for p in body.split(","))]
            if not pairs or int(size) <= 0 or any(o < 0 or n <= 0 for o, n in pairs):
                raise ValueError(text)
        except ValueError:
            raise ConfigError(f"reader.read_requests: {text!r} is not OFFSET+LENGTH,...@SIZE "
                              "(e.g. 0+4096,4096+6032@10128), as from-trace writes it") from None
        return cls(pairs, int(size))

    def text(self) -> str:
        """The configuration's words for it."""
        return ",".join(f"{o}+{n}" for o, n in self.pairs) + f"@{self.size}"

    def for_size(self, size: int) -> list[tuple[int, int]]:
        """The requests for a file of ``size`` bytes."""
        out = []
        for o, n in self.pairs:
            if o >= size:
                continue
            out.append((o, size - o if o + n >= self.size else min(n, size - o)))
        return out


def check(text: str, samples_per_file: int) -> None:
    """Refuse a pattern that cannot apply: nonsense, or files of several samples (a pattern
    replays whole-file reads, one sample per file, as from-trace writes it)."""
    if not text:
        return
    Requests.parse(text)
    if samples_per_file != 1:
        raise ConfigError("reader.read_requests replays whole-file reads and needs "
                          "dataset.num_samples_per_file: 1; remove one of them")
