"""Reading a fund file and its forensics: the encoding, the delimiter, text that is not a table
(binary files, NUL bytes, lines and files beyond what a screener export holds), rows that do not
parse (named by data row and line), and doubts about the settings worth a warning. `read_source`
gives the raw table and an `IngestReport` (what was read, and doubts); `fundgrpo.data.columns` maps the
table to the canonical columns and adds to the report what the settings changed.
"""

from __future__ import annotations

import csv
import io
import os
import pwd
import re
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator

import pandas as pd

AUTO_ENCODINGS = ("utf-8-sig", "cp949", "latin-1")  # BOM-safe UTF-8, Korean Windows, anything
MAX_EXAMPLES = 3


class IngestError(ValueError):
    """The source cannot be turned into the canonical table; the message says why."""


@dataclass(frozen=True)
class IngestReport:
    """What reading a source and the ingest settings did to it, beside the table (never in it): ingest's
    line (`ingestion.summary`), the validation report's notes, batch scoring's warnings. An unchanged
    source gives an empty report.

    >>> a = IngestReport(notes=("a.csv: note",), blanked={"-": 2})
    >>> b = a.merged(IngestReport(notes=("b.csv: note",), blanked={"-": 1, "n/a": 1}, unrated=1))
    >>> b.notes, b.blanked, b.unrated
    (('a.csv: note', 'b.csv: note'), {'-': 3, 'n/a': 1}, 1)
    """

    source: str = ""  # the file read
    encoding: str = ""  # the encoding used ("parquet" for Parquet)
    notes: tuple[str, ...] = ()  # read without error, but doubtful (each names its file)
    blanked: dict[str, int] = field(default_factory=dict)  # cells made missing, by `ingest.na_values` marker
    unrated: int = 0  # grades made missing by `ingest.unrated`
    duplicates_dropped: dict | None = None  # {"rows": n, "first": [data rows]} by `ingest.drop_duplicate_rows`
    fund_id_stripped: dict | None = None  # {"changed": n, "of": m} names `ingest.fund_id_strip` changed
    fund_id_snapped: int = 0  # share classes `ingest.fund_id_tolerance` joined to a close fund key
    batches: int = 0  # accepted monitoring batches laid over the source
    absent: dict[str, str] = field(default_factory=dict)  # batch scoring: canonical name -> mapped column absent

    def merged(self, other: IngestReport) -> IngestReport:
        """This report and another source's (the attributes and the series of `source: returns`)."""
        blanked = dict(self.blanked)
        for marker, n in other.blanked.items():
            blanked[marker] = blanked.get(marker, 0) + n
        return replace(
            self,
            notes=self.notes + other.notes,
            blanked=blanked,
            unrated=self.unrated + other.unrated,
            duplicates_dropped=self.duplicates_dropped or other.duplicates_dropped,
            fund_id_stripped=self.fund_id_stripped or other.fund_id_stripped,
            fund_id_snapped=self.fund_id_snapped + other.fund_id_snapped,
        )


def decode(data: bytes, encoding: str = "auto") -> tuple[str, str]:
    """(text, encoding used). "auto" tries `AUTO_ENCODINGS` in order.

    >>> decode("é".encode("utf-8-sig"))
    ('é', 'utf-8-sig')
    >>> decode("한".encode("cp949"))
    ('한', 'cp949')
    """
    candidates = AUTO_ENCODINGS if encoding == "auto" else (encoding,)
    for enc in candidates:
        try:
            return data.decode(enc), enc
        except UnicodeDecodeError:
            continue
        except LookupError as err:
            raise IngestError(f"unknown encoding {encoding!r}") from err
    raise IngestError(f"cannot decode the file as {encoding!r}; try encoding: auto")


DELIMITERS = ",;\t|"
# What one line and one file may hold. A screener row is a few thousand characters; a line of
# millions is not a table (one 10 MB line kept the CSV parser busy for minutes), and a file is
# read whole into memory.
MAX_LINE_CHARS = 200_000
MAX_FILE_BYTES = 2 * 1024**3


def longest_line(text: str) -> tuple[int, int]:
    r"""(1-based number, length) of the longest line; lines end as CSV readers end them (\n, \r\n, \r).

    >>> longest_line("a,b\n" + "x" * 9 + "\n1,2"), longest_line("a,b\r1,2\r")
    ((2, 9), (1, 3))
    """
    best = (0, -1)
    for number, line in enumerate(re.split(r"\r\n?|\n", text), 1):
        if len(line) > best[1]:
            best = (number, len(line))
    return best


def sniff_delimiter(text: str) -> str:
    r"""The CSV delimiter among `DELIMITERS`, from the first lines; "," when unsure.

    >>> sniff_delimiter("a;b;c\n1,5;2;3\n"), sniff_delimiter("a,b\n1,2\n"), sniff_delimiter("one column\n")
    (';', ',', ',')
    """
    sample = "\n".join(text.splitlines()[:20])
    try:
        return csv.Sniffer().sniff(sample, delimiters=DELIMITERS).delimiter
    except csv.Error:
        return ","


MAGIC = {
    b"\x1f\x8b": "a gzip file (decompress it first)",
    b"PK\x03\x04": "a zip archive or an .xlsx workbook (extract or save as CSV)",
    b"PAR1": "a Parquet file (give it the .parquet suffix)",
    b"\xd0\xcf\x11\xe0": "an old Excel .xls workbook (save as CSV)",
}


def not_text(data: bytes, path: Path) -> None:
    """Refuse what is not a text table, naming what it is instead.

    >>> not_text(b"\\x1f\\x8b\\x08rest", Path("f.csv"))
    Traceback (most recent call last):
    ...
    fundgrpo.data.reading.IngestError: f.csv: is a gzip file (decompress it first), not a CSV text file
    >>> not_text("a,b".encode("utf-16-le"), Path("f.csv"))  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    fundgrpo.data.reading.IngestError: f.csv: looks like UTF-16 without a byte-order mark
    (a NUL byte after most characters); set ingest.encoding: utf-16-le
    """
    for magic, what in MAGIC.items():
        if data.startswith(magic):
            raise IngestError(f"{path}: is {what}, not a CSV text file")
    head = data[:4096]
    if head.count(0) > len(head) // 4 and data[:2] not in (b"\xff\xfe", b"\xfe\xff"):
        odd_nuls = head[1::2].count(0) > len(head) // 4
        raise IngestError(
            f"{path}: looks like UTF-16 without a byte-order mark (a NUL byte after most characters); "
            f"set ingest.encoding: {'utf-16-le' if odd_nuls else 'utf-16-be'}"
        )


def line_count(text: str) -> int:
    r"""Lines in `text`, a last line without a line end included.

    >>> line_count("a\nb\n"), line_count("a\nb"), line_count("")
    (2, 2, 0)
    """
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _shown(sep: str) -> str:
    return "tab" if sep == "\t" else repr(sep)


def _setting(sep: str) -> str:
    return '"\\t"' if sep == "\t" else repr(sep)


def check_delimiter(text: str, sep: str, asked: str, path: Path) -> None:
    r"""A header that reads as one column but holds another common delimiter: the wrong delimiter,
    named with the one it looks like (rather than "column not found" for the whole header).

    >>> check_delimiter("a,b,c\n1,2,3\n", ";", ";", Path("f.csv"))  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    fundgrpo.data.reading.IngestError: f.csv: ingest.delimiter is ';' but the header looks ','-separated
    (line 1: 'a,b,c'); set ingest.delimiter: ',' (or auto)
    >>> check_delimiter("a;b\n1;2\n", ";", ";", Path("f.csv"))
    """
    for number, line in enumerate(io.StringIO(text), start=1):
        if line.strip():
            break
    else:
        return
    header = next(csv.reader([line.rstrip("\r\n")], delimiter=sep, skipinitialspace=True), [])
    if len(header) > 1:
        return
    counts = {d: line.count(d) for d in DELIMITERS if d != sep}
    best = max(counts, key=lambda d: counts[d])
    if not counts[best]:
        return  # one column indeed: reported later as the columns it lacks
    shown = line.rstrip("\r\n")
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    if asked == "auto":
        said = f"the sniffed delimiter is {_shown(sep)}"
    else:
        said = f"ingest.delimiter is {_shown(sep)}"
    raise IngestError(
        f"{path}: {said} but the header looks {_shown(best)}-separated (line {number}: {shown!r}); "
        f"set ingest.delimiter: {_setting(best)}" + ("" if asked == "auto" else " (or auto)")
    )


def _unclosed_quote(text: str, sep: str, row: list[str], start_line: int) -> int | None:
    """The line where the last record's quoted cell opens when no quote closes it before the end
    of the file (the record runs from `start_line` to the end), or None."""
    tail = text.split("\n", start_line - 1)[-1]
    try:
        for _ in csv.reader(io.StringIO(tail), delimiter=sep, skipinitialspace=True, strict=True):
            pass
    except csv.Error as err:
        if "unexpected end of data" not in str(err) or not row:
            return None
        # The open cell is the record's last field and holds the rest of the file: its line ends
        # are the file's last ones.
        return text.count("\n") - row[-1].count("\n") + 1
    return None


def check_nul(text: str, path: Path) -> None:
    """No NUL character: the file is damaged or not text (named before any other doubt)."""
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n")
        where = f"data row {line} (line {line + 1})" if line else "the header (line 1)"
        raise IngestError(f"{path}: a NUL byte in {where}: the file is damaged or not text")


@contextmanager
def csv_field_limit(size: int) -> Iterator[None]:
    """Let the csv module read cells of up to `size` characters (its default stops at 131072: a
    quote left open in a large file would be a bare csv.Error, not the line it opens on)."""
    old = csv.field_size_limit()
    csv.field_size_limit(max(old, size))
    try:
        yield
    finally:
        csv.field_size_limit(old)


def check_rows(text: str, sep: str, path: Path) -> list[str]:
    """Every data row has the header's number of fields and no NUL character: a row cut short
    (or a delimiter inside an unquoted cell) would otherwise shift or blank its values silently;
    a quote left open, which swallows the rest of the file into one cell, is named with its line.
    Returns doubts for `possible_misreadings`' list: rows that run over line ends (a quoted cell may hold a line
    break; a stray quote closed by another one merges lines the same way).

    >>> check_rows("a,b,c\\n1,2,3\\n4,5\\n", ",", Path("f.csv"))  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    fundgrpo.data.reading.IngestError: f.csv: 1 row(s) do not have the header's 3 fields: data row 2 has 2
    (a row cut short, or the delimiter inside an unquoted cell)
    >>> check_rows('a,b\\n1,"x\\n2,y\\n3,z\\n', ",", Path("f.csv"))  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    fundgrpo.data.reading.IngestError: f.csv: an unclosed quote: the quoted cell opening on line 2 (data row 1)
    is never closed and swallows the rest of the file, so 1 data row(s) were read from 4 lines; close the quote,
    or remove the stray '"'
    >>> print(*check_rows('a,b\\n1,"x\\ny"\\n', ",", Path("f.csv")))  # doctest: +NORMALIZE_WHITESPACE
    1 data row(s) run over line ends (data row 1: lines 2-3): a quoted cell holds a line break; if none should,
    look for a stray '"' there
    """
    check_nul(text, path)
    rows = csv.reader(io.StringIO(text), delimiter=sep, skipinitialspace=True)
    header: list[str] = []
    start = 1
    for header in rows:  # blank lines before the header are skipped, as pandas does
        if header:
            break
        start = rows.line_num + 1
    last = (0, header, start, rows.line_num)  # (data row, fields, first line, last line) of the last record
    bad, spanning = [], []
    for n, r in enumerate(rows, start=1):
        last = (n, r, last[3] + 1, rows.line_num)
        if r and len(r) != len(header):
            bad.append(last)
        elif last[3] > last[2]:
            spanning.append(last)
    n, row, first, end = last
    if end > first:  # the last record runs over line ends: a quote opened and never closed?
        opened = _unclosed_quote(text, sep, row, first)
        if opened is not None:
            which = f"data row {n}" if n else "the header"
            raise IngestError(
                f"{path}: an unclosed quote: the quoted cell opening on line {opened} ({which}) is never closed "
                f"and swallows the rest of the file, so {n} data row(s) were read from {line_count(text)} lines; "
                "close the quote, or remove the stray '\"'"
            )
    if bad:
        examples = ", ".join(
            f"data row {k} has {len(r)}" + (f" (lines {a}-{b}: a quoted cell runs over line ends)" if b > a else "")
            for k, r, a, b in bad[:MAX_EXAMPLES]
        )
        raise IngestError(
            f"{path}: {len(bad)} row(s) do not have the header's {len(header)} fields: {examples} "
            "(a row cut short, or the delimiter inside an unquoted cell)"
        )
    if not spanning:
        return []
    examples = ", ".join(f"data row {k}: lines {a}-{b}" for k, _, a, b in spanning[:MAX_EXAMPLES])
    return [
        f"{len(spanning)} data row(s) run over line ends ({examples}): a quoted cell holds a line break; "
        "if none should, look for a stray '\"' there"
    ]


def _user() -> str:
    """Who this process reads files as: "user NAME" (or "uid N")."""
    try:
        return f"user {pwd.getpwuid(os.geteuid()).pw_name}"
    except KeyError:
        return f"uid {os.geteuid()}"
    except (ImportError, AttributeError):  # not POSIX
        return "the current user"


def read_source(path: Path, encoding: str = "auto", delimiter: str = "auto") -> tuple[pd.DataFrame, IngestReport]:
    """Read a CSV (every cell as text; blank cells, and only they, missing: `na_values` are
    `blank_markers`' job) or Parquet file: the table, and the report (the encoding used, doubts)."""
    try:
        return _read_source(path, encoding, delimiter)
    except PermissionError as err:
        at = f" ({err.filename})" if err.filename and str(err.filename) != str(path) else ""
        raise IngestError(
            f"{path}: permission denied{at}: this process ({_user()}) may not read the file or open a folder "
            "above it; make it readable (e.g. chmod a+r) or copy it somewhere readable"
        ) from err


def _read_source(path: Path, encoding: str, delimiter: str) -> tuple[pd.DataFrame, IngestReport]:
    if path.is_dir():
        raise IngestError(f"{path}: is a folder; name the export file (ingest.path)")
    if not path.is_file():
        raise IngestError(f"{path}: file not found")
    if path.stat().st_size == 0:
        raise IngestError(f"{path}: file is empty (0 bytes)")
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet", ".pq"):
        raise IngestError(f"{path}: unsupported format {suffix!r} (use .csv or .parquet)")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise IngestError(
            f"{path}: {path.stat().st_size / 1024**3:.1f} GB is more than a file may hold "
            f"({MAX_FILE_BYTES / 1024**3:.0f} GB, fundgrpo/data/reading.py MAX_FILE_BYTES); split the export"
        )
    if suffix == ".csv":
        data = path.read_bytes()
        not_text(data, path)
        if encoding == "auto" and data[:2] in (b"\xff\xfe", b"\xfe\xff"):
            encoding = "utf-16"  # a byte-order mark says so for certain (Excel's "Unicode text")
        text, used = decode(data, encoding)
        if not text.strip():
            raise IngestError(
                f"{path}: holds only blank lines ({line_count(text)} line(s), {len(data)} bytes): no header, no rows"
            )
        number, longest = longest_line(text)
        if longest > MAX_LINE_CHARS:
            raise IngestError(
                f"{path}: line {number} holds {longest:,} characters, more than a line may "
                f"({MAX_LINE_CHARS:,}, fundgrpo/data/reading.py MAX_LINE_CHARS): not a table of funds "
                "(a file without line ends, or the wrong file)"
            )
        sep = sniff_delimiter(text) if delimiter == "auto" else delimiter
        check_nul(text, path)
        try:
            with csv_field_limit(len(text) + 1):
                check_delimiter(text, sep, delimiter, path)
                notes = check_rows(text, sep, path) + possible_misreadings(text, used, encoding)
        except csv.Error as err:  # what the checks above do not name: said as the csv module says it
            raise IngestError(f"{path}: cannot be read as CSV: {err}") from err
    else:
        with path.open("rb"):  # not readable: a PermissionError named as such, not a Parquet error
            pass
    try:
        if suffix == ".csv":
            # Text cells: ids keep leading zeros, and bad numbers are reported, not guessed. Only a blank
            # cell is missing here: pandas' own markers ("NA", "None", "null", "#N/A" ...) stay text.
            df = pd.read_csv(
                io.StringIO(text), dtype=str, sep=sep, skipinitialspace=True, keep_default_na=False, na_values=[""]
            )
        else:
            df, used = pd.read_parquet(path), "parquet"
    except pd.errors.EmptyDataError as err:
        raise IngestError(f"{path}: file is empty (no header)") from err
    except PermissionError:
        raise
    except (pd.errors.ParserError, OSError, ValueError) as err:  # malformed CSV, corrupt Parquet
        raise IngestError(f"{path}: cannot be read: {err}") from err
    if df.empty:
        raise IngestError(f"{path}: has no rows")
    said = tuple(f"{path}: {n}" for n in notes) if suffix == ".csv" else ()
    return df, IngestReport(source=str(path), encoding=used, notes=said)


MIXED = re.compile(
    r"[a-z][\uac00-\ud7a3\u4e00-\u9fff]|[\uac00-\ud7a3\u4e00-\u9fff][a-z]"
)  # "Soci걀": a letter glued to Hangul/Hanja
C1 = re.compile(r"[\x80-\x9f]")  # control characters; in Windows-1252 these bytes are € ‘ ’ “ ” – …


def possible_misreadings(text: str, used: str, asked: str) -> list[str]:
    """What may be wrong with a file that read without error, and cannot be decided for certain:
    reported (ingest's line, the validation report), never refused.

    >>> print(*possible_misreadings("name\\nSoci걀 G\\n", "cp949", "auto"))  # doctest: +NORMALIZE_WHITESPACE
    encoding guessed as cp949 (the file is not UTF-8) and 1 row(s) glue Latin letters to Hangul/Hanja, as a Western
    (Windows-1252) file read as cp949 would (data rows 1); if the export is Western, set ingest.encoding: cp1252
    >>> possible_misreadings("a,b\\n1,2", "utf-8-sig", "auto")
    ['the last line has no line end (data row 1): check that it is complete']
    """
    out = []
    rows = text.splitlines()[1:]
    if asked == "auto" and used == "cp949":
        hits = [i for i, line in enumerate(rows, start=1) if MIXED.search(line)]
        if hits:
            listed = ", ".join(map(str, hits[:MAX_EXAMPLES]))
            out.append(
                f"encoding guessed as cp949 (the file is not UTF-8) and {len(hits)} row(s) glue Latin letters to "
                f"Hangul/Hanja, as a Western (Windows-1252) file read as cp949 would (data rows {listed}); "
                "if the export is Western, set ingest.encoding: cp1252"
            )
    if asked in ("auto", "latin-1"):
        hits = [i for i, line in enumerate(rows, start=1) if C1.search(line)]
        if hits and used == "latin-1":
            listed = ", ".join(map(str, hits[:MAX_EXAMPLES]))
            out.append(
                f"{len(hits)} row(s) hold control characters U+0080-U+009F (data rows {listed}), "
                "which a Windows-1252 file read as latin-1 gives for € ‘ ’ “ ”; set ingest.encoding: cp1252"
            )
    if rows and text and not text.endswith(("\n", "\r")):
        out.append(f"the last line has no line end (data row {len(rows)}): check that it is complete")
    return out
