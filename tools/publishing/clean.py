"""Outputs as a reader should see them: no ANSI codes, warnings, idle progress, styles or local paths; long logs and tables shortened."""

from __future__ import annotations

import re

from bs4 import BeautifulSoup
from nbconvert.filters import strip_ansi
from nbconvert.preprocessors import CoalesceStreamsPreprocessor

from tools.publishing.alt_text import figure_alt, unique_alt
from tools.publishing.local_paths import TEXT_MIME_TYPES, replace_local_paths

COALESCE = CoalesceStreamsPreprocessor()
# Content a reader should not see, matched line by line or whole (never rewritten in place):
# ``warnings.formatwarning``: "<file>:<line>: <Category>: <message>", then the source line
# indented; logging's default format: "WARNING:<logger>:<message>".
WARNING_HEADER_RE = re.compile(r"^\S.*?:\d+: \w*Warning: |^WARNING:")
# A progress bar that never moved ("Training: |    | 0/? [00:00<?, ?it/s]") says nothing.
IDLE_PROGRESS_RE = re.compile(r".*\| *0/(?:\d+|\?) \[00:00<")
MATPLOTLIB_REPR_RE = re.compile(r"\[?<matplotlib\.[^\n]*>\]?|Text\([^\n]*\)")
TABLE_ROWS, TABLE_HEAD, TABLE_TAIL = 20, 10, 5
LOG_LINES, LOG_HEAD, LOG_TAIL = 40, 20, 10


def drop_warnings(text: str) -> str:
    """Remove Python warnings (header plus indented source lines) from stderr text."""
    kept, in_warning = [], False
    for line in text.splitlines(keepends=True):
        if WARNING_HEADER_RE.match(line):
            in_warning = True
        elif in_warning and line[:1] in (" ", "\t"):
            continue
        else:
            in_warning = False
            kept.append(line)
    return "".join(kept)


def drop_idle_progress(text: str) -> str:
    """Remove the lines of progress bars that never moved."""
    return "".join(line for line in text.splitlines(keepends=True)
                   if not IDLE_PROGRESS_RE.match(line))  # fmt: skip


def shorten_log(text: str) -> str:
    """A log over ``LOG_LINES`` lines as its head and tail, saying how much is left out."""
    lines = text.splitlines(keepends=True)
    if len(lines) <= LOG_LINES:
        return text
    omitted = len(lines) - LOG_HEAD - LOG_TAIL
    return "".join(lines[:LOG_HEAD] + [f"… {omitted} lines omitted …\n"] + lines[-LOG_TAIL:])


def cut_by_pandas(soup: BeautifulSoup) -> bool:
    """Whether a pandas table holds a cell that pandas cut (``...``) when it was displayed."""
    return any(cell.get_text().strip().endswith(("...", "…"))
               for table in soup.find_all("table", class_="dataframe")
               for cell in table.find_all(["td", "th"]))  # fmt: skip


def shorten_tables(soup: BeautifulSoup) -> bool:
    """Tables over ``TABLE_ROWS`` body rows kept as their head and tail rows, whole cells,
    with a row saying how many are left out; whether any was."""
    shortened = False
    for body in soup.find_all("tbody"):
        rows = body.find_all("tr", recursive=False)
        if len(rows) <= TABLE_ROWS:
            continue
        columns = sum(int(cell.get("colspan", 1)) for cell in rows[0].find_all(["td", "th"]))
        for row in rows[TABLE_HEAD:-TABLE_TAIL]:
            row.extract()
        gap, cell = soup.new_tag("tr"), soup.new_tag("td", colspan=str(columns))
        cell.string = f"… {len(rows) - TABLE_HEAD - TABLE_TAIL} rows omitted …"
        gap.append(cell)
        rows[TABLE_HEAD - 1].insert_after(gap)
        shortened = True
    return shortened


def clean_html(text: str) -> tuple[str, bool]:
    """An HTML output without ``<style>`` blocks (they would restyle the whole page) and with
    long tables shortened; and whether pandas had cut one of its tables."""
    soup = BeautifulSoup(text, "html.parser")
    cut = cut_by_pandas(soup)
    styles = soup.find_all("style")
    for style in styles:
        style.decompose()
    if shorten_tables(soup) or styles:
        text = str(soup).lstrip()
    return text, cut


def clean_outputs(cell, replacements: dict[str, str], heading: str, where: str,
                  described: dict | None = None, alts: set | None = None) -> list[str]:
    """Clean one code cell's outputs in place; return warnings about them."""
    warnings, cleaned = [], []
    COALESCE.preprocess_cell(cell, {}, 0)  # consecutive streams merged, progress collapsed
    for output in cell.outputs:
        if output.output_type == "stream":
            text = drop_idle_progress(strip_ansi(output.text).replace("\r", ""))
            if output.name == "stderr":
                text = drop_warnings(text)
            output.name = "stdout"  # what is left of stderr is information, not an error
            output.text = replace_local_paths(text, replacements)
            if not output.text.strip():
                continue
        elif output.output_type in ("execute_result", "display_data"):
            data = output.data
            if set(data) == {"text/plain"} and MATPLOTLIB_REPR_RE.fullmatch(data["text/plain"]):
                continue
            for mime in TEXT_MIME_TYPES:
                if mime in data:
                    text = strip_ansi(data[mime])
                    data[mime] = replace_local_paths(text, replacements, mime == "text/html")
            if "text/html" in data:
                data["text/html"], cut = clean_html(data["text/html"])
                if cut:
                    warnings.append(
                        f"{where}: pandas cut this table when the notebook ran "
                        "(display.max_colwidth or max_rows): the post shows it cut"
                    )
            if any(mime.startswith("image/") for mime in data):
                alt = figure_alt(output, cell.source, heading, described)
                output.metadata["alt"] = alt if alts is None else unique_alt(alt, heading, alts)
        cleaned.append(output)
    cell.outputs = cleaned
    COALESCE.preprocess_cell(cell, {}, 0)
    for output in cell.outputs:
        if output.output_type == "stream":
            output.text = shorten_log(output.text)
    return warnings
