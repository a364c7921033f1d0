"""Documents beside the fund table: the evidence of the methodology's qualitative criteria.

`ingest.documents.path` names a folder or one file. A folder is read file by file (names starting
with "." are skipped):

* a table, `.csv` (UTF-8) or `.parquet`: one document per row, columns `document_id`, `date`,
  `kind`, `language` (may be blank: detected), `text`, and the key: `share_class_id`, `fund_id` or
  `company`, exactly one of them filled per row;
* a `.txt` or `.md` file (UTF-8): one document, opened by a front matter block naming its key,
  date and kind (its id is the file's name within the folder)::

      ---
      fund_id: SYNF0001
      date: 2024-03-15
      kind: meeting_note
      language: ko
      ---
      책임운용역이 ...

A document keyed by a company applies to every fund that company runs; one keyed by a fund, to its
share classes. Every document is checked, and a failure names the file, the row and the field: the
key names a known share class, fund or company; the date is a date (YYYY-MM-DD); the language is
one the project writes (en, ko), declared or detected; the text is within the length bounds; ids
are unique. A document dated after the data's as-of date is kept but read by no evaluation as of
that date (`readable`), so a backtest never reads the future.

>>> docs = pd.DataFrame({"document_id": ["d1", "d2", "d3"], "key_kind": ["fund", "company", "fund"],
...     "key": ["F1", "Acme", "F2"], "date": ["2024-01-05", "2024-02-01", "2025-03-01"],
...     "kind": ["news"] * 3, "language": ["en"] * 3, "text": ["a", "b", "c"], "source": [""] * 3})
>>> funds = pd.DataFrame({"share_class_id": ["S1", "S2"], "fund_id": ["F1", "F2"], "company": ["Acme", "Acme"]})
>>> {k: [d.document_id for d in v] for k, v in by_share_class(docs, funds, "2024-12").items()}
{'S1': ['d2', 'd1'], 'S2': ['d2']}
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from fundgrpo.data.reading import IngestError
from fundgrpo.params import DocumentsSourceParams

KEYS = ("share_class_id", "fund_id", "company")
KEY_KIND = {"share_class_id": "share_class", "fund_id": "fund", "company": "company"}
LANGUAGES = ("en", "ko")
COLUMNS = ("document_id", "key_kind", "key", "date", "kind", "language", "text", "source")
TABLES = (".csv", ".parquet")
TEXTS = (".txt", ".md")
HANGUL = re.compile(r"[\uac00-\ud7a3\u1100-\u11ff\u3130-\u318f]")
LETTER = re.compile(r"[^\W\d_]")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
MAX_ERRORS = 10  # named in one message; the rest counted


@dataclass(frozen=True)
class Document:
    """One document as the evaluations read it."""

    document_id: str
    key_kind: str  # share_class | fund | company
    key: str
    date: str  # YYYY-MM-DD
    kind: str
    language: str  # en | ko
    text: str


def detect_language(text: str) -> str:
    """ "ko" when Hangul is at least a fifth of the letters, else "en" (the two languages written here).

    >>> detect_language("책임운용역이 사임했다"), detect_language("The manager left."), detect_language("ETF 운용")
    ('ko', 'en', 'ko')
    """
    letters = len(LETTER.findall(text))
    return "ko" if letters and len(HANGUL.findall(text)) / letters >= 0.2 else "en"


def _front_matter(raw: str, where: str) -> tuple[dict, str]:
    match = re.match(r"^---\s*\n(.*?)\n---\s*\n?(.*)$", raw, re.S)
    if not match:
        raise IngestError(f"{where}: no front matter: start the file with a '---' block naming its key, date and kind")
    try:
        meta = yaml.load(match.group(1), Loader=yaml.BaseLoader) or {}  # every value as written: text
    except yaml.YAMLError as err:
        raise IngestError(f"{where}: the front matter is not YAML: {err}") from None
    if not isinstance(meta, dict):
        raise IngestError(f"{where}: the front matter must be 'field: value' lines")
    return {str(k): "" if v is None else str(v) for k, v in meta.items()}, match.group(2).strip()


def _read_text_file(path: Path, name: str) -> dict:
    try:
        raw = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise IngestError(f"{path}: not UTF-8 text (byte {err.start}); save the document as UTF-8") from None
    meta, text = _front_matter(raw, str(path))
    return {**meta, "document_id": meta.get("document_id") or name, "text": text, "source": str(path)}


def _read_table(path: Path) -> list[dict]:
    if path.suffix == ".parquet":
        frame = pd.read_parquet(path)
    else:
        try:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
        except UnicodeDecodeError as err:
            raise IngestError(f"{path}: not UTF-8 text (byte {err.start}); save the table as UTF-8") from None
        except pd.errors.ParserError as err:
            raise IngestError(f"{path}: not a CSV table: {err}") from None
    missing = [c for c in ("document_id", "date", "kind", "text") if c not in frame.columns]
    if missing or not any(k in frame.columns for k in KEYS):
        need = missing + ([] if any(k in frame.columns for k in KEYS) else ["one of " + " / ".join(KEYS)])
        raise IngestError(f"{path}: columns {need} missing; it has {list(frame.columns)}")
    frame = frame.fillna("").astype(str)
    return [{**row, "source": f"{path} row {i + 1}"} for i, row in enumerate(frame.to_dict("records"))]


def read_raw(path: Path, skip: Path | None = None) -> list[dict]:
    """Every document under `path` (a folder or one file; never `skip`) as a dict of text fields with its `source`."""
    if not path.exists():  # no documents yet: ingest's line says so (`summary`)
        return []
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    files = [f for f in files if skip is None or f.resolve() != skip.resolve()]
    rows: list[dict] = []
    for file in files:
        if file.name.startswith(".") or any(part.startswith(".") for part in file.relative_to(path).parts[:-1]):
            continue
        suffix = file.suffix.lower()
        if suffix in TABLES:
            rows += _read_table(file)
        elif suffix in TEXTS:
            rows.append(_read_text_file(file, file.name if path.is_file() else file.relative_to(path).as_posix()))
        else:
            raise IngestError(f"{file}: unsupported document file {suffix!r} (use {', '.join(TABLES + TEXTS)})")
    return rows


def _check(row: dict, known: dict[str, set[str]], params: DocumentsSourceParams) -> tuple[dict | None, list[str]]:
    where = row["source"]
    errors = []
    keys = [k for k in KEYS if str(row.get(k, "")).strip()]
    if len(keys) != 1:
        errors.append(f"{where}: field key: give exactly one of {', '.join(KEYS)} (got {keys or 'none'})")
    elif str(row[keys[0]]).strip() not in known[keys[0]]:
        errors.append(f"{where}: field {keys[0]}: {row[keys[0]]!r} is not in the fund table")
    date = str(row.get("date", "")).strip()
    if not DATE.match(date) or pd.isna(pd.to_datetime(date, errors="coerce", format="%Y-%m-%d")):
        errors.append(f"{where}: field date: {date!r} is not a date (YYYY-MM-DD)")
    text = str(row.get("text", ""))
    if not params.min_chars <= len(text.strip()) <= params.max_chars:
        errors.append(
            f"{where}: field text: {len(text.strip())} characters, outside [{params.min_chars}, {params.max_chars}] "
            "(ingest.documents.min_chars / max_chars)"
        )
    language = str(row.get("language", "")).strip() or detect_language(text)
    if language not in LANGUAGES:
        errors.append(f"{where}: field language: {language!r}; use one of {list(LANGUAGES)} or leave it blank")
    if not str(row.get("document_id", "")).strip():
        errors.append(f"{where}: field document_id: empty")
    if not str(row.get("kind", "")).strip():
        errors.append(f"{where}: field kind: empty (e.g. meeting_note, news, commentary)")
    if errors:
        return None, errors
    key = keys[0]
    doc = {
        "document_id": str(row["document_id"]).strip(),
        "key_kind": KEY_KIND[key],
        "key": str(row[key]).strip(),
        "date": date,
        "kind": str(row["kind"]).strip(),
        "language": language,
        "text": text.strip(),
        "source": where,
    }
    return doc, []


def read(params: DocumentsSourceParams, funds: pd.DataFrame, root: Path = Path(".")) -> pd.DataFrame:
    """The documents under `params.path`, checked against the fund table `funds`: the `COLUMNS` frame,
    oldest first; an `IngestError` naming each failing file, row and field (the first `MAX_ERRORS`)."""
    return checked(read_raw(root / params.path, root / params.judgements if params.judgements else None), funds, params)


def checked(raw: list[dict], funds: pd.DataFrame, params: DocumentsSourceParams) -> pd.DataFrame:
    """`raw` (the documents as read: text fields and their `source`) checked against the fund table: the
    `COLUMNS` frame, oldest first, or an `IngestError` naming each failing row and field; nothing is kept from a
    failing set."""
    known = {k: set(funds[k].dropna().astype(str)) if k in funds.columns else set() for k in KEYS}
    docs, errors = [], []
    for row in raw:
        doc, problems = _check(row, known, params)
        errors += problems
        if doc:
            docs.append(doc)
    frame = pd.DataFrame(docs, columns=list(COLUMNS))
    twice = frame["document_id"][frame["document_id"].duplicated()]
    errors += [f"field document_id: {d!r} is given twice ({', '.join(frame.loc[frame['document_id'] == d, 'source'])})"
               for d in twice.unique()]  # fmt: skip
    if errors:
        raise refused("documents", errors)
    return frame.sort_values(["date", "document_id"], kind="stable").reset_index(drop=True)


def refused(what: str, errors: list[str]) -> IngestError:
    """The error for every problem found (the first MAX_ERRORS listed): nothing of `what` is kept."""
    more = f"\n... and {len(errors) - MAX_ERRORS} more" if len(errors) > MAX_ERRORS else ""
    listed = "\n".join(errors[:MAX_ERRORS])
    return IngestError(f"{what}: {len(errors)} problem(s); nothing was written:\n{listed}{more}")


def posted(given: dict[str, list[dict]], funds: pd.DataFrame, params: DocumentsSourceParams) -> pd.DataFrame:
    """Documents sent with funds (the API's `documents` of a fund), keyed by that share class, checked as
    ingest checks a file; a document without an id gets `<share class>/posted-<n>`.

    >>> f = pd.DataFrame({"share_class_id": ["S1"], "fund_id": ["F1"]})
    >>> posted({"S1": [{"date": "2024-05-02", "kind": "news", "text": "The lead manager left."}]}, f,
    ...        DocumentsSourceParams())[["document_id", "key", "language"]].values.tolist()
    [['S1/posted-1', 'S1', 'en']]
    >>> posted({"S1": [{"date": "2024-13-02", "kind": "news", "text": "x"}]}, f, DocumentsSourceParams())
    Traceback (most recent call last):
    ...
    fundgrpo.data.reading.IngestError: documents: 2 problem(s); nothing was written:
    S1 documents[1]: field date: '2024-13-02' is not a date (YYYY-MM-DD)
    S1 documents[1]: field text: 1 characters, outside [10, 20000] (ingest.documents.min_chars / max_chars)
    """
    rows = []
    for sid, items in given.items():
        for j, item in enumerate(items):
            fields = {k: "" if v is None else str(v) for k, v in item.items()}
            rows.append({**fields, "document_id": fields.get("document_id") or f"{sid}/posted-{j + 1}",
                         "share_class_id": sid, "source": f"{sid} documents[{j + 1}]"})  # fmt: skip
    return checked(rows, funds, params)


JUDGEMENT_COLUMNS = ("fund_id", "criterion", "judgement", "document_id", "quote")


def read_judgements(params: DocumentsSourceParams, funds: pd.DataFrame, docs: pd.DataFrame, root: Path = Path(".")):
    """The analysts' judgements of the qualitative criteria (`params.judgements`), checked: the fund is
    known, the judgement a whole number, the document one of `docs` and the quote in its text, within
    one sentence or of whole ones (what an answer cites, `sentences`). Empty
    (with its columns) when none are configured."""
    if not params.judgements:
        return pd.DataFrame(columns=list(JUDGEMENT_COLUMNS))
    path = root / params.judgements
    if not path.is_file():
        raise IngestError(f"{path}: not found (ingest.documents.judgements)")
    frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    missing = [c for c in JUDGEMENT_COLUMNS if c not in frame.columns]
    if missing:
        raise IngestError(f"{path}: columns {missing} missing; it has {list(frame.columns)}")
    by_id = dict(zip(docs["document_id"], docs["text"]))
    known = set(funds["fund_id"].astype(str))
    errors = []
    for i, row in frame.iterrows():
        where = f"{path} row {i + 1}"
        if row["fund_id"] not in known:
            errors.append(f"{where}: field fund_id: {row['fund_id']!r} is not in the fund table")
        if not re.fullmatch(r"-?\d+", row["judgement"].strip()):
            errors.append(f"{where}: field judgement: {row['judgement']!r} is not a whole number (-1, 0, 1 ...)")
        if row["document_id"] not in by_id:
            errors.append(f"{where}: field document_id: {row['document_id']!r} is not a document")
        elif spaced(row["quote"]) not in spaced(by_id[row["document_id"]]):
            errors.append(f"{where}: field quote: not found in document {row['document_id']!r}")
        elif not sentences_of(row["quote"], by_id[row["document_id"]]):
            errors.append(f"{where}: field quote: runs across sentences of {row['document_id']!r}; quote whole ones")
    if errors:
        raise refused("judgements", errors)
    return frame[list(JUDGEMENT_COLUMNS)].assign(judgement=frame["judgement"].astype(int))


def as_of(params: DocumentsSourceParams, funds: pd.DataFrame) -> str | None:
    """The date evaluations read documents up to: `params.as_of`, else the fund data's own (`as_of`
    column, the last month of the series), else None (every document).

    >>> as_of(DocumentsSourceParams(), pd.DataFrame({"as_of": ["2024-12"]}))
    '2024-12'
    """
    if params.as_of:
        return params.as_of
    if "as_of" in funds.columns and funds["as_of"].notna().any():
        return str(funds["as_of"].dropna().max())
    return None


def summary(documents: pd.DataFrame, as_of: str | None, path: Path | None = None) -> str:
    """One line: how many documents, by key and language, and how many are dated after the as-of date.

    >>> summary(pd.DataFrame({"key_kind": ["fund", "company"], "language": ["ko", "en"],
    ...                       "date": ["2024-01-01", "2025-01-01"]}), "2024-12")
    '2 documents (company 1, fund 1; en 1, ko 1); 1 dated after 2024-12, read by no evaluation as of it'
    """
    if documents.empty:
        absent = f" ({path} does not exist: ingest.documents.path)" if path is not None and not path.exists() else ""
        return f"0 documents{absent}"
    keys = ", ".join(f"{k} {n}" for k, n in sorted(documents["key_kind"].value_counts().items()))
    languages = ", ".join(f"{k} {n}" for k, n in sorted(documents["language"].value_counts().items()))
    later = len(documents) - len(readable(documents, as_of))
    after = f"; {later} dated after {as_of}, read by no evaluation as of it" if later else ""
    return f"{len(documents)} documents ({keys}; {languages}){after}"


def month_end(as_of: str) -> str:
    """The last day of an as-of month ("2024-12" -> "2024-12-31"); a full date stays as it is.

    >>> month_end("2024-02"), month_end("2024-03-15")
    ('2024-02-29', '2024-03-15')
    """
    if DATE.match(as_of):
        return as_of
    return str(pd.Period(as_of, freq="M").end_time.date())


def readable(documents: pd.DataFrame, as_of: str | None) -> pd.DataFrame:
    """The documents an evaluation as of `as_of` may read: dated on or before it (None: all)."""
    if not as_of:
        return documents
    return documents[documents["date"] <= month_end(as_of)]


def by_share_class(documents: pd.DataFrame, funds: pd.DataFrame, as_of: str | None) -> dict[str, list[Document]]:
    """Each share class's readable documents (its own, its fund's, its company's), newest first."""
    docs = readable(documents, as_of)
    keys = {
        (kind, str(value)) for column, kind in KEY_KIND.items() if column in funds for value in funds[column].dropna()
    }
    docs = docs[[k in keys for k in zip(docs["key_kind"], docs["key"].astype(str))]]  # a few funds: a few documents
    index: dict[tuple[str, str], list[Document]] = {}
    for row in docs.itertuples(index=False):
        doc = Document(
            row.document_id, row.key_kind, row.key, row.date, kind=row.kind, language=row.language, text=row.text
        )
        index.setdefault((row.key_kind, row.key), []).append(doc)
    out: dict[str, list[Document]] = {}
    for row in funds.itertuples(index=False):
        found = []
        for column, kind in KEY_KIND.items():
            value = getattr(row, column, None)
            if value is not None and not pd.isna(value):
                found += index.get((kind, str(value)), [])
        out[str(row.share_class_id)] = sorted(found, key=lambda d: (d.date, d.document_id), reverse=True)
    return out


def spaced(text: str) -> str:
    """`text` with every run of whitespace one space: how a quote is looked for in a document.

    >>> spaced(" The   manager  left. ")
    'The manager left.'
    """
    return " ".join(text.split())


def sentences(text: str) -> list[str]:
    """A document's sentences, as a prompt numbers them (from 1) and a citation names them: the text cut
    after a full stop, question or exclamation mark (Korean's too) before a space, and at line breaks.

    >>> sentences("Markets were calm.  The lead manager resigned in May.\\n책임운용역이 퇴사했다. 확인됨")
    ['Markets were calm.', 'The lead manager resigned in May.', '책임운용역이 퇴사했다.', '확인됨']
    """
    return [s.strip() for s in re.split(r"(?<=[.!?。！？])\s+|\n+", text) if s.strip()]


def sentences_of(quote: str, text: str) -> list[int]:
    """The numbers of the sentences of `text` a quote of it gives: the whole ones it holds, else the one it
    lies in; empty where the quote is not in the text or runs across sentences without holding one.

    >>> text = "Calm. An earlier report said she left. She did not. Then more."
    >>> sentences_of("report said", text), sentences_of("An earlier report said she left. She did not.", text)
    ([2], [2, 3])
    >>> sentences_of("said she left. She", text), sentences_of("fined", text)
    ([], [])
    """
    q, found = spaced(quote), sentences(text)
    held = [i for i, s in enumerate(found, start=1) if spaced(s) in q]
    return held or [i for i, s in enumerate(found, start=1) if q in spaced(s)][:1]


def texts(found: dict[str, list[Document]], share_class_ids: pd.Series) -> pd.Series:
    """Each share class's documents as one text (`fund_text`), aligned with `share_class_ids`: what the
    text baseline reads; "" for a share class without any."""
    return share_class_ids.astype(str).map(lambda i: fund_text(found.get(i, [])))


def fund_text(documents: list[Document]) -> str:
    """One fund's documents as one text, oldest first, each line dated: what a text model reads.

    >>> fund_text([Document("b", "fund", "F", "2024-02-01", "news", "en", "Later."),
    ...            Document("a", "fund", "F", "2024-01-01", "news", "en", "Earlier.")])
    '2024-01-01 news: Earlier.\\n2024-02-01 news: Later.'
    """
    return "\n".join(f"{d.date} {d.kind}: {d.text}" for d in sorted(documents, key=lambda d: (d.date, d.document_id)))
