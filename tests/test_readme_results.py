"""The README's results table says only what the files it names hold: every decimal number
(and every number of three digits or more) in a row's result is printed by the published
notebook, or written in the committed file or lab record, that its source column names."""

import re
from pathlib import Path

import pytest

from tools.edition_record import printed

ROOT = Path(__file__).resolve().parents[1]
NUMBER = re.compile(r"(?<![\w.])\d+\.\d+|\d{3,}")


def results_rows() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Reference results"):]
    section = section[:section.index("\n## ", 1)]
    return [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in section.splitlines()
            if line.startswith("| ") and not line.startswith(("| what", "|---"))]


def source_text(source: str) -> str:
    """What ``source`` says: a notebook's printed outputs, a file, or a lab folder's text files."""
    path = ROOT / source.rstrip("/")
    if path.is_dir():
        return "\n".join(f.read_text(errors="replace") for f in sorted(path.rglob("*"))
                         if f.suffix in (".md", ".json", ".jsonl", ".tsv"))
    if path.suffix == ".ipynb":
        return printed(path)
    return path.read_text()


def unheld_numbers(result: str, source: str) -> list[str]:
    """The numbers of ``result`` that the files named in ``source`` do not hold."""
    sources = re.findall(r"`([^`]+)`", source)
    assert sources and all((ROOT / s.rstrip("/")).exists() for s in sources), source
    held = "\n".join(source_text(s) for s in sources).replace(",", "")
    return [n for n in NUMBER.findall(result.replace(",", "")) if n not in held]


@pytest.mark.parametrize("row", results_rows(), ids=lambda row: row[0][:40])
def test_a_results_row_says_what_its_sources_hold(row):
    _, result, _, source = row
    assert unheld_numbers(result, source) == []


def test_a_number_no_source_holds_is_caught():
    assert unheld_numbers("874.3 s, and 1234.5 images/s", "`published/README.md`") == ["1234.5"]
