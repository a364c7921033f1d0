"""Any fund source -> the canonical table (`fundgrpo.data.canonical`); the `ingest` stage calls `run`.

Sources (`ingest.source`):
  * "returns": a folder (`ingest.path`) with monthly return/NAV series and an attributes
    table; metrics are computed with `fundgrpo.data.navmetrics` (the series win over
    same-named attributes).
  * "table": a screener export (`ingest.path`, CSV or Parquet, by extension).

Real exports are read by settings, not by clean-up scripts: the CSV delimiter is sniffed,
a decimal comma is read, blank cells and the configured missing-value markers (`na_values`, and
only those: "NA" or "None" stay text unless listed) become missing, unrated codes (`unrated`)
become unlabelled, exact duplicate rows can be dropped (`drop_duplicate_rows`), a share-class id
can be built from columns or generated, and a fund id can come from a name with plan suffixes
stripped (`fund_id_strip`). What the settings changed is counted in ingest's line (`summary`).

Only the columns' *shape* is checked here (present, numeric, decodable);
duplicates, ranges and null budgets are the validate stage's job.
"""

from __future__ import annotations

import csv
import difflib
import hashlib
import io
import os
import pwd
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Collection, Iterator

import numpy as np
import pandas as pd

from fundgrpo.data import navmetrics
from fundgrpo.data.canonical import BY_NAME, COLUMNS
from fundgrpo.data.riskadjusted import add_mrar
from fundgrpo.params import IngestParams

REQUIRED = ("share_class_id", "category")
AUTO_ENCODINGS = ("utf-8-sig", "cp949", "latin-1")  # BOM-safe UTF-8, Korean Windows, anything
TEXT_KINDS = ("id", "text")
MAX_EXAMPLES = 3


class IngestError(ValueError):
    """The source cannot be turned into the canonical table; the message says why."""


# ------------------------------------------------------------------- reading


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
    fundgrpo.data.ingestion.IngestError: f.csv: is a gzip file (decompress it first), not a CSV text file
    >>> not_text("a,b".encode("utf-16-le"), Path("f.csv"))  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    fundgrpo.data.ingestion.IngestError: f.csv: looks like UTF-16 without a byte-order mark
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
    fundgrpo.data.ingestion.IngestError: f.csv: ingest.delimiter is ';' but the header looks ','-separated
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
    Returns doubts for `doubts`' list: rows that run over line ends (a quoted cell may hold a line
    break; a stray quote closed by another one merges lines the same way).

    >>> check_rows("a,b,c\\n1,2,3\\n4,5\\n", ",", Path("f.csv"))  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    fundgrpo.data.ingestion.IngestError: f.csv: 1 row(s) do not have the header's 3 fields: data row 2 has 2
    (a row cut short, or the delimiter inside an unquoted cell)
    >>> check_rows('a,b\\n1,"x\\n2,y\\n3,z\\n', ",", Path("f.csv"))  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    fundgrpo.data.ingestion.IngestError: f.csv: an unclosed quote: the quoted cell opening on line 2 (data row 1)
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


def read_source(path: Path, encoding: str = "auto", delimiter: str = "auto") -> pd.DataFrame:
    """Read a CSV (every cell as text; blank cells, and only they, missing: `na_values` are
    `blank_markers`' job) or Parquet file; the encoding is in `attrs`."""
    try:
        return _read_source(path, encoding, delimiter)
    except PermissionError as err:
        at = f" ({err.filename})" if err.filename and str(err.filename) != str(path) else ""
        raise IngestError(
            f"{path}: permission denied{at}: this process ({_user()}) may not read the file or open a folder "
            "above it; make it readable (e.g. chmod a+r) or copy it somewhere readable"
        ) from err


def _read_source(path: Path, encoding: str, delimiter: str) -> pd.DataFrame:
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
            f"({MAX_FILE_BYTES / 1024**3:.0f} GB, fundgrpo/data/ingestion.py MAX_FILE_BYTES); split the export"
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
                f"({MAX_LINE_CHARS:,}, fundgrpo/data/ingestion.py MAX_LINE_CHARS): not a table of funds "
                "(a file without line ends, or the wrong file)"
            )
        sep = sniff_delimiter(text) if delimiter == "auto" else delimiter
        check_nul(text, path)
        try:
            with csv_field_limit(len(text) + 1):
                check_delimiter(text, sep, delimiter, path)
                notes = check_rows(text, sep, path) + doubts(text, used, encoding)
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
    df.attrs["encoding"] = used
    if suffix == ".csv" and notes:  # only when there are some: an unchanged source gives an unchanged table
        df.attrs["notes"] = [f"{path}: {n}" for n in notes]
    return df


MIXED = re.compile(
    r"[a-z][\uac00-\ud7a3\u4e00-\u9fff]|[\uac00-\ud7a3\u4e00-\u9fff][a-z]"
)  # "Soci걀": a letter glued to Hangul/Hanja
C1 = re.compile(r"[\x80-\x9f]")  # control characters; in Windows-1252 these bytes are € ‘ ’ “ ” – …


def doubts(text: str, used: str, asked: str) -> list[str]:
    """What may be wrong with a file that read without error, and cannot be decided for certain:
    reported (ingest's line, the validation report), never refused.

    >>> print(*doubts("name\\nSoci걀 G\\n", "cp949", "auto"))  # doctest: +NORMALIZE_WHITESPACE
    encoding guessed as cp949 (the file is not UTF-8) and 1 row(s) glue Latin letters to Hangul/Hanja, as a Western
    (Windows-1252) file read as cp949 would (data rows 1); if the export is Western, set ingest.encoding: cp1252
    >>> doubts("a,b\\n1,2", "utf-8-sig", "auto")
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


def blank_markers(raw: pd.DataFrame, markers: tuple[str, ...]) -> pd.DataFrame:
    """Cells that are (after stripping) one of `markers` become missing, in every column;
    `attrs["blanked"]` counts them by marker (markers that blanked nothing are left out).

    >>> out = blank_markers(pd.DataFrame({"a": ["1", " - ", "n/a"], "b": ["-", "NA", None]}), ("-", "n/a"))
    >>> out["a"].tolist(), out["b"].tolist(), out.attrs["blanked"]
    (['1', nan, nan], [nan, 'NA', None], {'-': 2, 'n/a': 1})
    """
    if not markers:
        return raw
    wanted = set(markers)
    out = raw.copy()
    counts = dict.fromkeys(markers, 0)
    for column in out.columns:
        if out[column].dtype == object:
            stripped = out[column].map(lambda v: v.strip() if isinstance(v, str) else None)
            hit = stripped.isin(wanted).to_numpy()
            if hit.any():
                for marker, n in stripped[hit].value_counts().items():
                    counts[marker] += int(n)
                out[column] = out[column].where(~hit, np.nan)
    out.attrs = dict(raw.attrs)
    blanked = {m: n for m, n in counts.items() if n}
    if blanked:  # only when there are some: an unchanged source gives an unchanged table
        out.attrs["blanked"] = blanked
    return out


# ------------------------------------------------------------- column checks


def missing_column_message(
    what: str, column: str, available: list[str], where: str, taken: Collection[str] = ()
) -> str:
    """Name the missing column, suggest close matches (never one in `taken`: already mapped to
    another field), list what there is.

    >>> print(missing_column_message("column_map.return_1y", "GBRReturnM13", ["GBRReturnM12", "Name"], "x.csv"))
    ... # doctest: +NORMALIZE_WHITESPACE
    x.csv: column_map.return_1y: source column 'GBRReturnM13' not found; did you mean 'GBRReturnM12'?
    available: ['GBRReturnM12', 'Name']
    >>> print(missing_column_message("column_map.return_10y", "GBRReturnM120", ["GBRReturnM12"], "x.csv",
    ...                              taken=["GBRReturnM12"]))
    x.csv: column_map.return_10y: source column 'GBRReturnM120' not found; available: ['GBRReturnM12']
    """
    close = [c for c in difflib.get_close_matches(column, available, n=3 + len(taken), cutoff=0.6) if c not in taken]
    close = close[:3]
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ";"
    return f"{where}: {what}: source column {column!r} not found{hint} available: {available}"


def _check_config(params: IngestParams) -> None:
    """Mistakes in the mapping itself, before any data is looked at."""
    for name in list(params.column_map) + list(params.scale):
        if name not in BY_NAME:
            close = difflib.get_close_matches(name, list(BY_NAME), n=3)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise IngestError(f"{name!r} is not a canonical column{hint}")
    for name in params.scale:
        if BY_NAME[name].kind != "number":
            raise IngestError(f"scale.{name}: only numeric columns can be scaled")
    dropped = set(params.drop_columns) & set(params.column_map.values())
    if dropped:
        raise IngestError(f"columns {sorted(dropped)} are both mapped (column_map) and dropped (drop_columns)")


def select_columns(raw: pd.DataFrame, params: IngestParams, where: str) -> dict[str, pd.Series]:
    """Canonical name -> source column: mapped ones, then canonically named ones."""
    available = [str(c) for c in raw.columns]
    picked: dict[str, pd.Series] = {}
    for name, source in params.column_map.items():
        if source not in raw.columns:
            taken = [other for key, other in params.column_map.items() if key != name]
            raise IngestError(missing_column_message(f"column_map.{name}", source, available, where, taken))
        picked[name] = raw[source]
    for col in COLUMNS:
        if col.name not in picked and col.name in raw.columns and col.name not in params.drop_columns:
            picked[col.name] = raw[col.name]
    return picked


# ------------------------------------------------------------------ values


def _text(values: pd.Series) -> pd.Series:
    """Stripped text; integral floats (Parquet ids) without '.0'; missing stays missing."""
    if pd.api.types.is_float_dtype(values) and values.dropna().mod(1).eq(0).all():
        values = values.astype("Int64")
    return values.astype(object).map(lambda v: None if pd.isna(v) else str(v).strip())


def _row(index: pd.Index, position: int) -> int:
    """The 1-based data row of a position: by an integer index (the source's row numbers, kept
    when exact duplicate rows were dropped), else by position."""
    return int(index[position]) + 1 if pd.api.types.is_integer_dtype(index) else position + 1


def to_number(values: pd.Series, label: str, where: str, decimal: str = ".") -> pd.Series:
    """Floats from text; blanks are NaN; any other text is an `IngestError` with examples (data rows
    numbered by the source's 0-based row index, so rows dropped before do not shift them).
    `decimal` "," reads "1.234,5" as 1234.5.

    >>> to_number(pd.Series(["1.5", "", None, " 2 "]), "x", "f.csv").tolist()
    [1.5, nan, nan, 2.0]
    >>> to_number(pd.Series(["1.234,5", "-0,25"]), "x", "f.csv", decimal=",").tolist()
    [1234.5, -0.25]
    >>> to_number(pd.Series(["1", "n/a%", "3"]), "'X' (return_1y)", "f.csv")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    fundgrpo.data.ingestion.IngestError: f.csv: column 'X' (return_1y) has 1 non-numeric value(s): data row 2: 'n/a%'
    (a marker for missing goes in ingest.na_values; a decimal comma needs ingest.decimal: ",")
    """
    if pd.api.types.is_bool_dtype(values):
        raise IngestError(f"{where}: column {label} holds true/false, not numbers")
    if pd.api.types.is_numeric_dtype(values):
        return values.astype(float)
    text = values.astype(object).where(values.notna()).map(lambda v: v.strip() if isinstance(v, str) else v)
    text = text.replace("", np.nan)
    if decimal == ",":
        text = text.map(lambda v: v.replace(".", "").replace(",", ".") if isinstance(v, str) else v)
    numbers = pd.to_numeric(text, errors="coerce")
    bad = text.notna() & numbers.isna()
    if bad.any():
        positions = np.flatnonzero(bad.to_numpy())
        examples = ", ".join(f"data row {_row(values.index, i)}: {values.iloc[i]!r}" for i in positions[:MAX_EXAMPLES])
        raise IngestError(
            f"{where}: column {label} has {len(positions)} non-numeric value(s): {examples} "
            '(a marker for missing goes in ingest.na_values; a decimal comma needs ingest.decimal: ",")'
        )
    return numbers.astype(float)


def grade_dtype(values: pd.Series) -> pd.Series:
    """Int64 when every grade is a whole number; else float, left for validation to flag.

    >>> grade_dtype(pd.Series([1.0, None, 5.0])).dtype
    Int64Dtype()
    >>> grade_dtype(pd.Series([1.0, 2.5])).dtype
    dtype('float64')
    """
    present = values.dropna()
    if present.mod(1).eq(0).all():
        return values.astype("Int64")
    return values


def strip_patterns(values: pd.Series, patterns: tuple[str, ...]) -> pd.Series:
    r"""Text with each regex removed (case-insensitive), then trimmed: e.g. plan suffixes off
    a scheme name, so that the plans of one fund share a fund id.

    >>> names = pd.Series(["Axis Bluechip Fund - Direct Plan - Growth", "Axis Bluechip Fund - Regular Plan - Growth"])
    >>> strip_patterns(names, (r"\s*-\s*(direct|regular)\b.*$",)).tolist()
    ['Axis Bluechip Fund', 'Axis Bluechip Fund']
    """
    compiled = [re.compile(pattern, re.IGNORECASE) for pattern in patterns]

    def strip(v: object) -> object:
        if not isinstance(v, str):
            return v
        for rx in compiled:
            v = rx.sub("", v)
        return v.strip()

    return values.map(strip)


def snap_close(parts: pd.DataFrame, tolerance: float) -> tuple[pd.DataFrame, int]:
    """Numeric key columns with values within `tolerance` (relative) of each other, among rows equal
    on the other key columns, made one value (the smallest of each chain of close values); and how
    many rows changed. Why: fund-level assets reported per currency class round differently
    (401441871 vs 401441872), which would split one fund's share classes across the split.

    >>> parts = pd.DataFrame({"tna": [100.0, 100.001, 100.5, 100.0], "cat": ["a", "a", "a", "b"]})
    >>> snapped, changed = snap_close(parts, 1e-4)
    >>> snapped["tna"].tolist(), changed
    ([100.0, 100.0, 100.5, 100.0], 1)
    """
    out, changed = parts.copy(), 0
    for column in parts.columns:
        values = pd.to_numeric(parts[column], errors="coerce")
        if values.isna().sum() > parts[column].isna().sum():  # not a numeric key: matched exactly
            continue
        others = [c for c in parts.columns if c != column]
        keys = parts[others].astype(str).agg("\x1f".join, axis=1) if others else pd.Series("", index=parts.index)
        for _, rows in values.groupby(keys):
            distinct = np.sort(rows.dropna().unique())
            mapping = {}
            for before, v in zip([None, *distinct[:-1]], distinct):
                if before is None or abs(v - before) > tolerance * max(abs(v), abs(before)):
                    first = v  # a new chain
                mapping[v] = first
            moved = rows.notna() & (rows.map(mapping) != rows)
            if moved.any():  # each moved value takes the chain's first value as the source wrote it
                written = {v: parts.at[i, column] for i, v in rows.dropna().items()}
                out.loc[moved[moved].index, column] = rows[moved].map(lambda v: written[mapping[v]])
                changed += int(moved.sum())
    return out, changed


def fund_id_from(
    raw: pd.DataFrame,
    columns: tuple[str, ...],
    share_class_id: pd.Series,
    strip: tuple[str, ...] = (),
    tolerance: float = 0.0,
) -> pd.Series:
    r"""A stable short hash of the named columns' values (after `strip_patterns`; numeric ones
    within `tolerance` of each other made equal, `snap_close`); a row missing any of them is its own
    fund. With `strip`, `attrs["stripped"]` counts the rows whose values the patterns changed, of
    the rows with a value; with `tolerance`, `attrs["snapped"]` the rows whose value it moved (for
    ingest's line).

    >>> raw = pd.DataFrame({"tna": ["10", "10", None], "cat": ["a", "a", "a"]})
    >>> ids = fund_id_from(raw, ("tna", "cat"), pd.Series(["s1", "s2", "s3"]))
    >>> ids[0] == ids[1], ids[2]
    (True, 's3')
    >>> names = pd.DataFrame({"n": ["A - Direct", "A - Regular", "B ", None]})
    >>> ids = fund_id_from(names, ("n",), pd.Series(["s1", "s2", "s3", "s4"]), (r"\s*-\s*(direct|regular)\b.*$",))
    >>> ids[0] == ids[1] != ids[2], ids.attrs["stripped"]
    (True, {'changed': 2, 'of': 3})
    """
    parts = raw[list(columns)].astype(object).where(raw[list(columns)].notna())
    stripped = None
    if strip:
        before = parts.apply(lambda column: column.map(lambda v: v.strip() if isinstance(v, str) else v))
        parts = parts.apply(lambda column: strip_patterns(column, strip)).replace("", np.nan)
        named = before.notna()
        stripped = {
            "changed": int((parts.ne(before) & named).any(axis=1).sum()),
            "of": int(named.any(axis=1).sum()),
        }
    complete = parts.notna().all(axis=1).to_numpy()
    snapped = None
    if tolerance > 0:
        parts, snapped = snap_close(parts, tolerance)
    joined = parts.astype(str).agg("\x1f".join, axis=1)
    hashed = joined.map(lambda s: "f" + hashlib.sha1(s.encode("utf-8")).hexdigest()[:12])
    # Grouping on a missing value would lump unrelated share classes together.
    ids = pd.Series(np.where(complete, hashed, share_class_id.to_numpy()), index=raw.index)
    if stripped is not None:
        ids.attrs["stripped"] = stripped
    if snapped is not None:
        ids.attrs["snapped"] = snapped
    return ids


def share_class_ids(raw: pd.DataFrame, params: IngestParams, where: str) -> pd.Series:
    """The share-class id when the source has none: the `share_class_id_from` columns joined
    with " | ", or (`share_class_id_generate`) "row-<n>" by data row. Repeated ids are an error
    naming the rows: two share classes must never be merged silently.

    >>> raw = pd.DataFrame({"Name": ["A", "A", "B"], "Plan": ["Direct", "Regular", "Direct"]})
    >>> p = IngestParams(share_class_id_from=("Name", "Plan"))
    >>> share_class_ids(raw, p, "x.csv").tolist()
    ['A | Direct', 'A | Regular', 'B | Direct']
    >>> share_class_ids(raw, IngestParams(share_class_id_from=("Name",)), "x.csv")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    fundgrpo.data.ingestion.IngestError: x.csv: share_class_id_from ['Name'] gives 1 id(s) to more than one row:
    'A' (data rows 1, 2); add a column that tells them apart, or set share_class_id_generate: true
    """
    if params.share_class_id_generate:
        return pd.Series([f"row-{_row(raw.index, i)}" for i in range(len(raw))], index=raw.index)
    for column in params.share_class_id_from:
        if column not in raw.columns:
            raise IngestError(
                missing_column_message("share_class_id_from", column, [str(c) for c in raw.columns], where)
            )
    parts = raw[list(params.share_class_id_from)].astype(object)
    ids = parts.apply(lambda row: " | ".join("" if pd.isna(v) else str(v).strip() for v in row), axis=1)
    repeated = ids[ids.duplicated(keep=False)]
    if not repeated.empty:
        groups = repeated.groupby(repeated, sort=False).groups
        examples = "; ".join(
            f"{key!r} (data rows {', '.join(str(_row(raw.index, raw.index.get_loc(i))) for i in rows[:MAX_EXAMPLES])})"
            for key, rows in list(groups.items())[:MAX_EXAMPLES]
        )
        exact = _duplicated(raw, keep=False)
        fix = (
            "; rows repeated cell for cell (exact duplicates) are dropped by ingest.drop_duplicate_rows: true"
            if exact[ids.duplicated(keep=False).to_numpy()].any()
            else ""
        )
        raise IngestError(
            f"{where}: share_class_id_from {list(params.share_class_id_from)} gives {len(groups)} id(s) to more than "
            f"one row: {examples}; add a column that tells them apart, or set share_class_id_generate: true{fix}"
        )
    return ids


def unrated_mask(values: pd.Series, codes: tuple[str, ...]) -> pd.Series:
    """Rows whose grade is one of the `codes` meaning "not rated" (as text, or as the same number).

    >>> unrated_mask(pd.Series(["0", "0.0", "3", None, "NR"]), ("0", "NR")).tolist()
    [True, True, False, False, True]
    """
    text = values.astype(object).map(lambda v: v.strip() if isinstance(v, str) else v)
    numeric_codes = [float(c) for c in codes if pd.notna(pd.to_numeric(c, errors="coerce"))]
    as_text = text.map(lambda v: None if pd.isna(v) else str(v)).isin(list(codes))
    as_number = pd.to_numeric(text, errors="coerce").isin(numeric_codes)
    return (as_text | as_number).astype(bool)


def _duplicated(raw: pd.DataFrame, keep: str | bool = "first") -> np.ndarray:
    """Rows equal cell for cell to another row (`DataFrame.duplicated`); none when cells are unhashable."""
    try:
        return raw.duplicated(keep=keep).to_numpy()
    except TypeError:  # list-valued Parquet cells: not a screener export's duplicates
        return np.zeros(len(raw), dtype=bool)


def exact_duplicates(raw: pd.DataFrame) -> list[tuple[int, int]]:
    """(data row, the earlier data row it repeats), 1-based, for every row equal cell for cell to
    an earlier one.

    >>> exact_duplicates(pd.DataFrame({"a": ["x", "y", "x", "x"], "b": ["1", "2", "1", None]}))
    [(3, 1)]
    """
    repeats = _duplicated(raw)
    if not repeats.any():
        return []
    keys = pd.util.hash_pandas_object(raw, index=False).to_numpy()
    first: dict[int, int] = {}
    out = []
    for position, (key, repeated) in enumerate(zip(keys.tolist(), repeats)):
        if repeated:
            out.append((_row(raw.index, position), _row(raw.index, first[key])))
        else:
            first.setdefault(key, position)
    return out


def drop_exact_duplicates(raw: pd.DataFrame, params: IngestParams, where: str) -> pd.DataFrame:
    """`raw` without its exact duplicate rows when `ingest.drop_duplicate_rows` (counted in
    `attrs["duplicates_dropped"]`, with the first rows' numbers); otherwise as it is, the rows
    named in a note (a repeated share_class_id is refused later: by validate, or here when built)."""
    repeats = exact_duplicates(raw)
    if not repeats:
        return raw
    listed = ", ".join(f"data row {i} repeats data row {j}" for i, j in repeats[:MAX_EXAMPLES])
    more = f" and {len(repeats) - MAX_EXAMPLES} more" if len(repeats) > MAX_EXAMPLES else ""
    if params.drop_duplicate_rows:
        out = raw[~_duplicated(raw)]
        out.attrs = dict(raw.attrs, duplicates_dropped={"rows": len(repeats), "first": [i for i, _ in repeats[:3]]})
        return out
    out = raw.copy()
    note = (
        f"{where}: {len(repeats)} exact duplicate row(s), kept: {listed}{more} (data rows count from 1 after the "
        "header); set ingest.drop_duplicate_rows: true to drop them"
    )
    out.attrs = dict(raw.attrs, notes=[*raw.attrs.get("notes", []), note])
    return out


def to_canonical(raw: pd.DataFrame, params: IngestParams, where: str) -> pd.DataFrame:
    """Map, type and scale a raw source table into canonical columns (in canonical order).
    `attrs` carry what the settings changed, for ingest's line (`summary`): `unrated` (grades set
    missing by `ingest.unrated`), `blanked` (cells by `na_values` marker), `duplicates_dropped`,
    `fund_id_stripped`; and the source's `notes`."""
    _check_config(params)
    attrs = dict(raw.attrs)
    raw = raw.reset_index(drop=True)  # data row n is index n - 1, also after duplicates are dropped
    raw.attrs = attrs
    raw = drop_exact_duplicates(raw, params, where)
    raw = blank_markers(raw, params.na_values)
    picked = select_columns(raw, params, where)
    if "share_class_id" not in picked and (params.share_class_id_from or params.share_class_id_generate):
        picked["share_class_id"] = share_class_ids(raw, params, where)
    for name in REQUIRED:
        if name not in picked:
            hint = " or build it (share_class_id_from, share_class_id_generate)" if name == "share_class_id" else ""
            raise IngestError(
                f"{where}: required column {name!r} is absent: map it in column_map{hint} "
                f"(available: {[str(c) for c in raw.columns]})"
            )
    source_of = {name: params.column_map.get(name, name) for name in picked}
    out: dict[str, pd.Series] = {}
    unrated = 0
    for name, values in picked.items():
        col = BY_NAME[name]
        if col.kind in TEXT_KINDS:
            out[name] = _text(values)
            continue
        if col.kind == "grade" and params.unrated:
            mask = unrated_mask(values, params.unrated)
            unrated += int(mask.sum())
            values = values.where(~mask.to_numpy(), np.nan)
        label = repr(source_of[name]) + (f" ({name})" if source_of[name] != name else "")
        numbers = to_number(values, label, where, params.decimal) * params.scale.get(name, 1.0)
        out[name] = grade_dtype(numbers) if col.kind == "grade" else numbers
    for name in params.scale:
        if name not in out:
            raise IngestError(f"{where}: scale.{name}: the source does not provide {name!r}")
    if "fund_id" not in out:
        if params.fund_id_from:
            for source in params.fund_id_from:
                if source not in raw.columns:
                    message = missing_column_message("fund_id_from", source, [str(c) for c in raw.columns], where)
                    raise IngestError(message)
            out["fund_id"] = fund_id_from(
                raw, params.fund_id_from, out["share_class_id"], params.fund_id_strip, params.fund_id_tolerance
            )
        else:
            out["fund_id"] = out["share_class_id"]  # no fund grouping known: each class is a fund
    table = pd.DataFrame(out)
    table = table[[c.name for c in COLUMNS if c.name in table.columns]].reset_index(drop=True)
    table.attrs["unrated"] = unrated
    # Only what there is: an unchanged source gives an unchanged table.
    for key in ("notes", "blanked", "duplicates_dropped"):
        if raw.attrs.get(key):
            table.attrs[key] = raw.attrs[key]
    if "stripped" in out["fund_id"].attrs:
        table.attrs["fund_id_stripped"] = out["fund_id"].attrs["stripped"]
    if "snapped" in out["fund_id"].attrs:
        table.attrs["fund_id_snapped"] = out["fund_id"].attrs["snapped"]
    return table


# ------------------------------------------------------------------- sources


def ingest_table(params: IngestParams, root: Path) -> pd.DataFrame:
    """A screener export (CSV/Parquet) -> canonical table."""
    if not params.path:
        raise IngestError("ingest.path is empty: name the screener export for source: table")
    path = root / params.path
    raw = read_source(path, params.encoding, params.delimiter)
    table = to_canonical(raw, params, str(path))  # carries the file's notes
    table.attrs["encoding"] = raw.attrs["encoding"]
    return table


def _series(params: IngestParams, root: Path) -> pd.DataFrame:
    """The long monthly series, checked and typed."""
    rp = params.returns
    path = root / params.path / rp.series_file
    raw = read_source(path, params.encoding, params.delimiter)
    raw = blank_markers(raw, params.na_values)
    available = [str(c) for c in raw.columns]
    needed = {"id_column": rp.id_column, "date_column": rp.date_column, "value_column": rp.value_column}
    if rp.benchmark_column:
        needed["benchmark_column"] = rp.benchmark_column
    for key, column in needed.items():
        if column not in raw.columns:
            raise IngestError(missing_column_message(f"returns.{key}", column, available, str(path)))
    series = pd.DataFrame({rp.id_column: _text(raw[rp.id_column]), rp.date_column: raw[rp.date_column]})
    for key in ("value_column", "benchmark_column"):
        if key in needed:
            series[needed[key]] = to_number(raw[needed[key]], repr(needed[key]), str(path), params.decimal)
    try:
        navmetrics.to_month(series[rp.date_column].dropna())
    except (ValueError, TypeError) as err:
        raise IngestError(f"{path}: column {rp.date_column!r} has values that are not months: {err}") from err
    series = series.dropna(subset=[rp.id_column, rp.date_column])
    series.attrs = {k: raw.attrs[k] for k in ("notes", "blanked") if raw.attrs.get(k)}
    return series


def ingest_returns(params: IngestParams, root: Path) -> pd.DataFrame:
    """Monthly series + attributes -> canonical table with computed metrics and `as_of`."""
    rp = params.returns
    if rp.value_kind not in ("return", "nav"):
        raise IngestError(f"returns.value_kind must be 'return' or 'nav', got {rp.value_kind!r}")
    if not params.path:
        raise IngestError("ingest.path is empty: name the folder holding the series and attributes files")
    attr_path = root / params.path / rp.attributes_file
    attributes = to_canonical(read_source(attr_path, params.encoding, params.delimiter), params, str(attr_path))
    found = dict(attributes.attrs)  # what ingest's line reports, before the join below
    series = _series(params, root)
    metrics = navmetrics.compute_long(
        series,
        rp.id_column,
        rp.date_column,
        rp.value_column,
        rp.benchmark_column or None,
        rp.value_kind,
        rp.risk_free_rate,
    )
    if not attributes["share_class_id"].isin(metrics.index).any():
        raise IngestError(
            f"no share class of {attr_path} has a series in {root / params.path / rp.series_file} "
            f"(column {rp.id_column!r}); check returns.id_column"
        )
    # The series are the source of truth for metrics: same-named attributes are replaced.
    attributes = attributes.drop(columns=[c for c in metrics.columns if c in attributes.columns])
    table = attributes.join(metrics, on="share_class_id")
    table = table[[c.name for c in COLUMNS if c.name in table.columns]].copy()
    table["as_of"] = metrics.attrs["as_of"]  # the last month the metrics cover
    table.attrs["unrated"] = found.get("unrated", 0)
    notes = found.get("notes", []) + series.attrs.get("notes", [])
    if notes:
        table.attrs["notes"] = notes
    blanked = dict(found.get("blanked", {}))
    for marker, n in series.attrs.get("blanked", {}).items():
        blanked[marker] = blanked.get(marker, 0) + n
    if blanked:
        table.attrs["blanked"] = blanked
    for key in ("duplicates_dropped", "fund_id_stripped", "fund_id_snapped"):
        if key in found:
            table.attrs[key] = found[key]
    return table


def with_batches(table: pd.DataFrame, batches_dir: Path) -> pd.DataFrame:
    """`table` with the accepted monitoring batches laid over it, oldest file first.

    Batches are canonical Parquet files written by the monitoring flow, named so they
    sort by date (batch-YYYY-MM...). The newest snapshot of a share class wins; a share
    class only in the source keeps its source row. No folder or no file: `table` as is.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> pd.DataFrame({"share_class_id": ["b", "c"], "category": ["x", "y"]}).to_parquet(d / "batch-1.parquet")
    >>> with_batches(pd.DataFrame({"share_class_id": ["a", "b"], "category": ["x", "z"]}), d)["category"].tolist()
    ['x', 'x', 'y']
    """
    files = sorted(batches_dir.glob("*.parquet")) if batches_dir.is_dir() else []
    if not files:
        return table
    frames = [table]
    for path in files:
        batch = pd.read_parquet(path)
        if "share_class_id" not in batch:
            raise IngestError(f"{path}: accepted batch has no share_class_id column")
        frames.append(batch)
    combined = pd.concat(frames, ignore_index=True).drop_duplicates("share_class_id", keep="last")
    canonical = [c.name for c in COLUMNS if c.name in combined.columns]
    combined = combined[canonical + [c for c in combined.columns if c not in canonical]]
    combined.attrs = dict(table.attrs, batches=len(files))
    return combined.reset_index(drop=True)


def run(params: IngestParams, root: Path = Path(".")) -> pd.DataFrame:
    """The canonical table from the configured source (paths relative to `root`),
    with any accepted monitoring batches from `params.batches_dir` laid over it."""
    if params.source == "table":
        table = ingest_table(params, root)
    elif params.source == "returns":
        table = ingest_returns(params, root)
    else:
        raise IngestError(f"ingest.source must be 'returns' or 'table', got {params.source!r}")
    table = with_batches(table, root / params.batches_dir) if params.batches_dir else table
    return derive(table)


def derive(table: pd.DataFrame) -> pd.DataFrame:
    """Columns computed from mapped ones: MRAR(2) risk-adjusted returns (`fundgrpo.data.riskadjusted`),
    only where their inputs exist; a value the source gives is kept. Canonical order, extras last."""
    out = add_mrar(table)
    canonical = [c.name for c in COLUMNS if c.name in out.columns]
    out = out[canonical + [c for c in out.columns if c not in canonical]]
    out.attrs = dict(table.attrs)
    return out


# ---------------------------------------------------------------------- main


def summary(table: pd.DataFrame) -> str:
    """One line: rows, funds, categories, labelled rows; then what the settings changed (exact
    duplicate rows dropped, cells blanked by `na_values`, names `fund_id_strip` changed).

    >>> t = pd.DataFrame({"fund_id": ["f", "f"], "category": ["a", "a"],
    ...                   "expert_grade": pd.array([3, None], dtype="Int64")})
    >>> summary(t)
    '2 rows, 1 funds, 1 categories, 1 labelled rows'
    >>> t.attrs = {"blanked": {"-": 2, "n/a": 1}, "fund_id_stripped": {"changed": 2, "of": 2},
    ...            "duplicates_dropped": {"rows": 1, "first": [3]}}
    >>> print(summary(t))  # doctest: +NORMALIZE_WHITESPACE
    2 rows, 1 funds, 1 categories, 1 labelled rows; 1 exact duplicate row(s) dropped (data row 3;
    ingest.drop_duplicate_rows); ingest.na_values blanked 3 cell(s): '-' 2, 'n/a' 1; ingest.fund_id_strip changed 2
    of 2 name(s)
    """
    labelled = int(table["expert_grade"].notna().sum()) if "expert_grade" in table else 0
    unrated = f" ({table.attrs['unrated']} unrated, counted unlabelled)" if table.attrs.get("unrated") else ""
    line = (
        f"{len(table)} rows, {table['fund_id'].nunique()} funds, "
        f"{table['category'].nunique()} categories, {labelled} labelled rows{unrated}"
    )
    dropped = table.attrs.get("duplicates_dropped")
    if dropped:
        first = ", ".join(map(str, dropped["first"])) + (", ..." if dropped["rows"] > len(dropped["first"]) else "")
        rows = "data rows" if dropped["rows"] > 1 else "data row"
        line += f"; {dropped['rows']} exact duplicate row(s) dropped ({rows} {first}; ingest.drop_duplicate_rows)"
    blanked = table.attrs.get("blanked")
    if blanked:
        by_marker = ", ".join(f"{marker!r} {n}" for marker, n in blanked.items())
        line += f"; ingest.na_values blanked {sum(blanked.values())} cell(s): {by_marker}"
    stripped = table.attrs.get("fund_id_stripped")
    if stripped:
        line += f"; ingest.fund_id_strip changed {stripped['changed']} of {stripped['of']} name(s)"
    if table.attrs.get("fund_id_snapped"):
        snapped = table.attrs["fund_id_snapped"]
        line += f"; ingest.fund_id_tolerance joined {snapped} share class(es) to a close fund key"
    return line
