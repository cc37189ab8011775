"""The watch stream reader: lines of any length, split wherever the chunks fall."""

from __future__ import annotations

from daemon.kube.watch import split_line_batches


class Chunks:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)

    async def readany(self) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""


async def collect(chunks: list[bytes]) -> list[bytes]:
    return [line async for lines in split_line_batches(Chunks(chunks)) for line in lines]


async def test_lines_split_across_chunks_are_joined() -> None:
    assert await collect([b'{"a":', b'1}\n{"b"', b":2}\n"]) == [b'{"a":1}', b'{"b":2}']


async def test_several_lines_in_one_chunk_and_blank_lines_are_skipped() -> None:
    assert await collect([b"one\n\ntwo\nthree\n"]) == [b"one", b"two", b"three"]


async def test_a_final_line_without_newline_is_kept() -> None:
    assert await collect([b"one\ntw", b"o"]) == [b"one", b"two"]


async def test_a_line_of_several_megabytes_is_read_whole() -> None:
    big = b'{"pad":"' + b"x" * (5 * 1024 * 1024) + b'"}'
    chunks = [big[i : i + 65536] for i in range(0, len(big), 65536)] + [b"\n", b"next\n"]
    lines = await collect(chunks)
    assert lines == [big, b"next"]
